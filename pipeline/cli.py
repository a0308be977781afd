"""Command line: `python -m pipeline [--recipe FILE] <command> [key=value ...]`.

Each stage command loads the config (defaults < recipe < overrides), calls
``stages.<name>.run(cfg)`` and appends a record of itself to the run folder
(pipeline.run_folder: command, config hash, status, counts); while it runs,
the command answers read-only SQL from other processes
(pipeline.query_server), so `pipeline sql` works during a run. Errors a user
can fix (bad recipe, unknown key, missing file, a step not run yet, zero
accepted trajectories) carry ``user_facing`` (pipeline.errors): they print
one clear line and exit 1 without a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import re
import sys

import yaml

from pipeline import run_folder
from pipeline.config import PipelineConfig, config_help
from pipeline.errors import UserError, is_user_facing
from stages import STAGES

_OVERRIDE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*=")

# What a step consumes when the command names nothing: the newest finished run of the step before.
# command -> (its flag's dest, the step that makes the input, the kind of id, the config key it fills)
DEFAULT_INPUTS = {
    "dataset": ("selection", "filter", "selection", "dataset.selection_id"),
    "train": ("dataset", "dataset", "dataset", "train.dataset_id"),
    "evaluate": ("policy", "train", "policy", "evaluate.candidates"),
}


# Room actions that only read the warehouse: they leave the run folder as it is.
READ_ONLY_ROOM_ACTIONS = {"list", "show", "export"}
# Commands that call models: with serve.manage they start the recipe's local servers first.
MODEL_COMMANDS = {"sample", "grade", "rl", "evaluate", "distill", "nightly"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pipeline", description=__doc__.splitlines()[0])
    p.add_argument("--recipe", default=None, help="YAML recipe (path, or name under pipeline/recipes)")
    sub = p.add_subparsers(dest="command", required=True)

    rooms = sub.add_parser("rooms", help="generate, import, build from CUAD, list, show or export rooms")
    rsub = rooms.add_subparsers(dest="action", required=True)
    rsub.add_parser("generate", help="generate rooms.n_rooms synthetic rooms")
    i = rsub.add_parser("import", help="import a folder of documents as a room")
    i.add_argument("folder")
    i.add_argument("--name", required=True)
    i.add_argument("--rubric", default=None, help="optional rubric file (YAML or JSONL)")
    i.add_argument("--split", default="train", choices=["train", "heldout"])
    c = rsub.add_parser("cuad", help="build rooms from the CUAD / MAUD / ContractNLI corpora")
    c.add_argument("corpus", help="folder holding cuad/, maud/ and contractnli/")
    c.add_argument("--n-rooms", type=int, default=2)
    c.add_argument("--contracts-per-room", type=int, default=40)
    rsub.add_parser("list", help="list rooms in the warehouse")
    sh = rsub.add_parser("show", help="folder tree, counts, tokens and rubric kinds of a room")
    sh.add_argument("name")
    ex = rsub.add_parser("export", help="write a room's documents as files (and its rubric as JSONL)")
    ex.add_argument("name")
    ex.add_argument("out")

    for name in STAGES[1:]:
        sp = sub.add_parser(name, help=f"run the {name} stage (key=value overrides after it)")
        if name == "grade":
            sp.add_argument(
                "--regrade",
                action="store_true",
                help="also grade trajectories an older grader version graded (same as grade.regrade=true)",
            )
        if name == "dataset":
            sp.add_argument(
                "--selection", help="selection id to build from (default: the newest filter run's)"
            )
        if name == "train":
            sp.add_argument("--dataset", help="dataset id to train on (default: the newest dataset run's)")
        if name == "rl":
            sp.add_argument("--policy", help="policy id to start GRPO from (default: the champion, printed)")
        if name == "evaluate":
            sp.add_argument(
                "--policy",
                action="append",
                help="candidate policy id, repeatable (default: the newest train run's)",
            )
    for name, text in [("distill", "run every stage once"), ("nightly", "run one nightly improvement round")]:
        sub.add_parser(name, help=text)
    sub.add_parser("serve", help="start the recipe's local vLLM servers and keep them until Ctrl-C")
    lin = sub.add_parser(
        "lineage", help="print what a policy, dataset or selection was made from, down to the rooms"
    )
    lin.add_argument("id", help="a policy, dataset or selection id")
    show = sub.add_parser(
        "show", help="write one trajectory's page (turns, subagent calls, marked memo) and print its path"
    )
    show.add_argument("trajectory_id")

    q = sub.add_parser("sql", help="run SQL against the run's warehouse and print a table")
    q.add_argument("query", nargs="?", help="a SQL statement")
    q.add_argument("--file", help="a .sql file, e.g. sql/queries/criteria_failing_most.sql")
    q.add_argument("--shell", action="store_true", help="interactive DuckDB shell")
    q.add_argument(
        "--write",
        action="store_true",
        help="allow statements that change the warehouse (read-only without it; waits for a running stage)",
    )

    gc = sub.add_parser(
        "grader-check",
        help="grade the known-answer memos (empty, oracle, dump, ...) on the warehouse's rooms; exit 1 if a bar fails",
    )
    gc.add_argument("--corpus", default=None, help="folder holding cuad/: adds the CUAD expert-label memo")
    gc.add_argument("--room", action="append", default=None, help="only this room (repeatable)")
    gc.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed the adversarial memos are drawn from (0: the reproducible gate)",
    )
    cal = sub.add_parser(
        "calibrate",
        help="A/A: the champion rule on a policy against itself, over random splits of its stored held-out "
        "episodes; prints the false-promotion rate, exit 1 above 5%%",
    )
    cal.add_argument("--policy", default=None, help="policy id (default: the champion, printed)")
    cal.add_argument("--trials", type=int, default=500, help="random A/A splits (default 500)")
    pc = sub.add_parser(
        "program-check",
        help="run the ladder of reference root programs through the harness and judge; exit 1 if a rung's "
        "margin over the one below fails (pipeline/grading/program_check.py)",
    )
    pc.add_argument("--rooms", type=int, default=10, help="generated rooms (default 10, 20 to 300 documents)")
    pc.add_argument(
        "--seed",
        type=int,
        default=7_919_000,
        help="first generated room's seed (default: one no recipe uses)",
    )
    pc.add_argument("--corpus", default=None, help="folder holding cuad/: adds CUAD rooms")
    pc.add_argument("--cuad-rooms", type=int, default=2, help="CUAD rooms when --corpus is given (default 2)")
    jc = sub.add_parser(
        "judge-check",
        help="grade the known-answer and sampled memos with the LLM judge (models.judge); print its agreement "
        "with the reference judge and CUAD experts",
    )
    jc.add_argument(
        "--corpus", default=None, help="folder holding cuad/: adds the CUAD expert-label comparison"
    )
    jc.add_argument("--room", action="append", default=None, help="only this room (repeatable)")
    jc.add_argument(
        "--memo", action="append", default=None, help="only this known-answer memo, e.g. oracle (repeatable)"
    )
    jc.add_argument(
        "--sampled", type=int, default=8, help="sampled memos (trajectories) per room (default 8)"
    )

    cfgp = sub.add_parser("config", help="print the resolved config, or every key with its help")
    cfgp.add_argument("--keys", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # key=value overrides may appear anywhere after the command (argparse cannot
    # mix them with a subcommand's own positionals), so take them out first.
    overrides = [a for a in argv if _OVERRIDE.match(a)]
    args = _parser().parse_args([a for a in argv if not _OVERRIDE.match(a)])
    try:
        cfg, note = run_folder.load(args.recipe, overrides)
        if note:
            print(note, file=sys.stderr)
        return _dispatch(args, cfg, argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if is_user_facing(exc) or isinstance(exc, FileNotFoundError):
            print(f"error: {exc}", file=sys.stderr)
            return 1
        raise


def _first_process() -> bool:
    """False in every process of a multi-process launch (accelerate, torchrun) but the first.

    Only the first one records the command, starts the recipe's servers, answers SQL and writes the
    warehouse; the others take their share of the training step (train, rl).
    """
    return os.environ.get("RANK", "0") == "0" and os.environ.get("LOCAL_RANK", "0") == "0"


def _serving_readers(cfg: PipelineConfig, command: str) -> contextlib.AbstractContextManager:
    """While a command that writes runs, it answers read-only SQL (see pipeline.query_server)."""
    if not _first_process():
        return contextlib.nullcontext()
    from pipeline.query_server import serve_readers

    return serve_readers(cfg.run.db_path, cfg.run.query_host, cfg.run.query_port, command)


def _model_servers(cfg: PipelineConfig, command: str) -> contextlib.AbstractContextManager:
    """With serve.manage, the recipe's local vLLM servers run for the command (pipeline.serving)."""
    if not (cfg.serve.manage and command in MODEL_COMMANDS and _first_process()):
        return contextlib.nullcontext()
    from pipeline.serving import running_servers

    return running_servers(cfg)


def _dispatch(args: argparse.Namespace, cfg: PipelineConfig, argv: list[str]) -> int:
    if args.command == "config":
        if args.keys:
            for key, default, text in config_help():
                print(f"{key:40s} {default:24s} {text}")
        else:
            print(yaml.safe_dump(cfg.to_dict(), sort_keys=False), end="")
        return 0
    if args.command == "sql":
        from pipeline import sqlcli

        return sqlcli.main(cfg, args.query, args.file, args.shell, args.write)
    if args.command == "serve":
        from pipeline.serving import serve_forever

        return serve_forever(cfg)
    if args.command == "lineage":
        from pipeline import lineage

        con = _open_warehouse(cfg, read_only=True)
        try:
            print(lineage.render(lineage.chain(con, args.id)))
        finally:
            con.close()
        return 0
    if args.command == "show":
        from pipeline.report.trace_pages import write_one

        con = _open_warehouse(cfg, read_only=True)
        try:
            print(write_one(con, cfg, args.trajectory_id))
        finally:
            con.close()
        return 0
    if args.command == "grader-check":
        from pipeline.grading.known_answers import print_warehouse_check

        return print_warehouse_check(cfg.run.db_path, args.corpus, args.room, args.seed)
    if args.command == "calibrate":
        from pipeline import evaluation
        from pipeline.calibration import aa_calibration, episode_scores, print_calibration

        con = _open_warehouse(cfg, read_only=True)
        try:
            row = None if args.policy else con.execute("select policy_id from champion").fetchone()
            if not args.policy and row is None:
                raise UserError("calibrate: no champion yet; name the policy (--policy POLICY_ID)")
            policy = args.policy or row[0]
            if not args.policy:
                print(f"calibrate: using the champion {policy}", file=sys.stderr)
            scores = episode_scores(con, policy, evaluation.heldout_rooms(con))
        finally:
            con.close()
        try:
            result = aa_calibration(
                scores, policy, cfg.evaluate.min_effect, trials=args.trials, seed=cfg.run.seed
            )
        except ValueError as exc:
            raise UserError(str(exc)) from None
        return print_calibration(result, cfg.evaluate.min_effect)
    if args.command == "program-check":
        from pipeline.grading.program_check import print_check

        return print_check(
            args.rooms, args.seed, args.corpus, args.cuad_rooms, cfg.models.subagent, cfg.harness
        )
    if args.command == "judge-check":
        from pipeline.grading.judge_check import print_judge_check

        return print_judge_check(cfg, args.corpus, args.room, args.sampled, args.memo)
    if getattr(args, "regrade", False):
        cfg.grade.regrade = True
    if args.command == "rooms" and args.action in READ_ONLY_ROOM_ACTIONS:
        from stages import rooms

        return rooms.cli(cfg, args)
    if args.command in DEFAULT_INPUTS:
        _fill_inputs(args, cfg)
    if args.command == "rl" and _first_process():
        _fill_rl_policy(args, cfg)  # the other processes train with the first one's plan
    command = f"rooms {args.action}" if args.command == "rooms" else args.command
    recording = run_folder.recorded(cfg, argv, command, args.recipe) if _first_process() else _unrecorded()
    with (
        recording as record,
        _model_servers(cfg, args.command),
        _serving_readers(cfg, args.command),
    ):
        if args.command == "rooms":
            from stages import rooms

            return rooms.cli(cfg, args)
        module = importlib.import_module(f"stages.{args.command}")
        result = record["result"] = module.run(cfg)
    if isinstance(result, dict):
        shown = {k: v for k, v in result.items() if not isinstance(v, (list, dict)) or len(str(v)) < 400}
        print(json.dumps(shown, indent=2, default=str))
    return 0


@contextlib.contextmanager
def _unrecorded():
    """Another process of a multi-process launch: the first one records the command."""
    yield {}


def _open_warehouse(cfg: PipelineConfig, read_only: bool):
    from pipeline import db

    if not cfg.run.db_path.exists():
        raise UserError(f"{cfg.run.db_path}: no warehouse (run the earlier stages first)")
    return db.connect(cfg.run.db_path, read_only=read_only, lock_timeout_s=cfg.run.lock_timeout_s)


def _fill_rl_policy(args: argparse.Namespace, cfg: PipelineConfig) -> None:
    """The CLI edge of `rl`: --policy or rl.policy wins; else the champion (the base until one beat it), printed."""
    if args.policy:
        cfg.rl.policy = args.policy
    if cfg.rl.policy:
        return
    from pipeline import champion

    con = _open_warehouse(cfg, read_only=False)
    try:
        cfg.rl.policy = champion.current(con, cfg)
    finally:
        con.close()
    print(f"rl: starting from the champion, policy {cfg.rl.policy}", flush=True)


def _fill_inputs(args: argparse.Namespace, cfg: PipelineConfig) -> None:
    """The CLI edge: an explicit flag or config key wins; else the newest finished run's output, printed."""
    dest, stage, kind, key = DEFAULT_INPUTS[args.command]
    section, field = key.split(".")
    given = getattr(args, dest)
    if given:
        setattr(getattr(cfg, section), field, given)
        return
    if getattr(getattr(cfg, section), field):
        return
    from pipeline import lineage

    # Other ranks of a multi-process launch only read; the first one may bring the schema up to date.
    con = _open_warehouse(cfg, read_only=not _first_process())
    try:
        made = lineage.newest_output(con, stage, kind)
    finally:
        con.close()
    if made is None:
        raise UserError(
            f"{args.command}: no {stage} run has made a {kind} yet: run `{stage}` first, or name one"
        )
    setattr(getattr(cfg, section), field, [made.id] if field == "candidates" else made.id)
    print(f"{args.command}: {made.says(kind, stage)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
