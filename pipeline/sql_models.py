"""The warehouse's SQL models (views) and SQL data tests, dbt style.

Models live in layers under ``sql/``: ``staging/stg_<name>.sql`` are thin
views over the raw tables of ``sql/schema``; ``marts/<name>.sql`` are the
views readers query, built on staging and on other marts. Each file is one
model, named after its file, and declares what it reads in a header line::

    -- depends_on: stg_grades, trajectory_scores

naming models and raw tables alike. The declaration is checked against the
body: a model named after ``from`` or ``join`` that is not declared is an
error, so the order the views are created in cannot drift from what they
read (hence no CTE may take a model's name). Models are created in topological order; a missing or cyclic
dependency fails with one line naming the file.

``sql/tests/<name>.sql`` are data tests: each a query returning the rows that
violate one invariant of the warehouse, so zero rows means it holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# Creation order of the layers; a model may read only raw tables and models of its own or an earlier layer.
LAYERS = ("staging", "marts")
TESTS_DIR = "tests"

_DEPENDS_ON = re.compile(r"^--\s*depends_on:(?P<names>.*)$", re.MULTILINE)
_READS = re.compile(r"\b(?:from|join)\s+([a-z_][a-z0-9_]*)", re.IGNORECASE)
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class ModelError(RuntimeError):
    """A model file that cannot be created: bad name, undeclared, missing or cyclic dependency."""


@dataclass(frozen=True)
class Model:
    name: str  # the view's name: the file's stem
    layer: str
    path: Path
    sql: str
    depends_on: tuple[str, ...]  # as declared: models and raw tables

    @property
    def relpath(self) -> str:
        """'sql/<layer>/<name>.sql', the way errors name the file."""
        return f"sql/{self.layer}/{self.path.name}"


def declared_dependencies(sql: str) -> tuple[str, ...]:
    """Names listed on the ``-- depends_on:`` header lines, in order."""
    names: list[str] = []
    for m in _DEPENDS_ON.finditer(sql):
        names += [n.strip() for n in m.group("names").split(",") if n.strip()]
    return tuple(names)


def referenced_names(sql: str) -> set[str]:
    """Identifiers that follow ``from`` or ``join`` in ``sql``, comments left out (CTE names included)."""
    code = "\n".join(line.split("--", 1)[0] for line in sql.splitlines())
    return {m.group(1).lower() for m in _READS.finditer(code)}


def load_models(sql_dir: Path) -> list[Model]:
    """Every model file under the layer folders of ``sql_dir``, checked for naming and declarations."""
    models: list[Model] = []
    for layer in LAYERS:
        for path in sorted((sql_dir / layer).glob("*.sql")):
            sql = path.read_text()
            model = Model(path.stem, layer, path, sql, declared_dependencies(sql))
            if not _NAME.match(model.name):
                raise ModelError(f"{model.relpath}: a model's file name is snake_case")
            if layer == "staging" and not model.name.startswith("stg_"):
                raise ModelError(f"{model.relpath}: staging models are named stg_<name>")
            models.append(model)
    seen: dict[str, Model] = {}
    for model in models:
        if model.name in seen:
            raise ModelError(
                f"{model.relpath}: model {model.name} is also defined in {seen[model.name].relpath}"
            )
        seen[model.name] = model
    for model in models:
        undeclared = sorted(
            (referenced_names(model.sql) & seen.keys()) - set(model.depends_on) - {model.name}
        )
        if undeclared:
            raise ModelError(
                f"{model.relpath}: reads {', '.join(undeclared)} without declaring it in -- depends_on:"
            )
    return models


def creation_order(models: list[Model], tables: set[str]) -> list[Model]:
    """``models`` ordered so each comes after the models it depends on.

    ``tables`` are the raw tables present; a dependency that is neither a model
    nor one of them is missing. A staging model may depend on raw tables only,
    a mart on staging models, marts and raw tables.
    """
    by_name = {m.name: m for m in models}
    for model in models:
        for dep in model.depends_on:
            if dep in by_name:
                if LAYERS.index(by_name[dep].layer) > LAYERS.index(model.layer):
                    raise ModelError(f"{model.relpath}: depends on {dep}, a model of a later layer")
                if model.layer == "staging":
                    raise ModelError(f"{model.relpath}: staging models read raw tables only, not {dep}")
            elif dep not in tables:
                raise ModelError(f"{model.relpath}: depends on {dep}, which is neither a model nor a table")

    ordered: list[Model] = []
    state: dict[str, str] = {}  # name -> 'visiting' | 'done'

    def visit(model: Model, path: list[str]) -> None:
        if state.get(model.name) == "done":
            return
        if state.get(model.name) == "visiting":
            cycle = [*path[path.index(model.name) :], model.name]
            raise ModelError(f"{model.relpath}: dependency cycle {' -> '.join(cycle)}")
        state[model.name] = "visiting"
        for dep in model.depends_on:
            if dep in by_name:
                visit(by_name[dep], [*path, model.name])
        state[model.name] = "done"
        ordered.append(model)

    for model in models:
        visit(model, [])
    return ordered


def data_tests(sql_dir: Path) -> dict[str, str]:
    """name -> query of every ``sql/tests/<name>.sql``: each returns the rows that violate its invariant."""
    return {p.stem: p.read_text() for p in sorted((sql_dir / TESTS_DIR).glob("*.sql"))}
