"""Text building blocks for synthetic data rooms: name pools, sentence pools, renderers.

Everything here is ordinary diligence prose: nothing in these pools mentions a
change of control, assignment consents, exclusivity or any other planted-issue
trigger, so a planted clause (pipeline.rooms.synthetic.issues) is the only place where an
issue's wording occurs. Speed matters (a 5,000-document room is ~320M
characters): paragraphs are built from a randomised lead sentence, which keeps
sentence prefixes distinct across the room for coverage probes, followed by a
few pre-rendered boilerplate sentences joined with ``str.join``.
"""

from __future__ import annotations

import random
import re

# ---------------------------------------------------------------- name pools
COMPANY_PREFIXES = (
    "Acme Alder Amberline Apex Arbor Argent Ashford Aurora Avalon Bayview Beacon Birchwood Blackstone Bluefin "
    "Bluestone Boreal Brightwater Broadleaf Cairn Calder Canyon Cascade Cedar Centauri Clearbrook Cobalt Copperline "
    "Coral Crescent Crestview Cypress Dalton Delmar Driftwood Eastgate Ember Evergreen Fairhaven Falcon Fernhill "
    "Fieldstone Firefly Foxglove Galena Garnet Glacier Glenwood Granite Greystone Halcyon Harbor Hawthorne Heron "
    "Highland Horizon Ironwood Juniper Keystone Kestrel Lakeshore Larkspur Lodestar Longview Lumen Maple Mariner "
    "Meadowlark Meridian Mesa Millbrook Monarch Northwind Oakridge Obsidian Onyx Orchard Osprey Pacifica Palisade "
    "Pinecrest Pioneer Polaris Prairie Quarry Quicksilver Radiant Redwood Ridgeline Riverbend Rosewood Sable "
    "Saffron Sagebrush Sandpiper Sapphire Sequoia Shoreline Silverleaf Skyline Solstice Sparrow Starling Stonebridge "
    "Summit Sunridge Tamarack Terrace Thistle Timberline Topaz Tidewater Trailhead Trillium Tundra Upland Valence "
    "Vantage Verdant Vireo Waypoint Westbrook Whitecap Willow Windward Wren Yarrow Zephyr Zenith Halberd Lyric "
    "Marlowe Quillon Rutherford Sterling Tessellate Umber Vesper Wexford Yardley"
).split()
COMPANY_NOUNS = (
    "Analytics Biologics Capital Components Consulting Dynamics Energy Engineering Fabrication Foods Freight "
    "Health Holdings Industries Instruments Labs Logistics Manufacturing Materials Media Medical Metals Networks "
    "Packaging Partners Pharma Plastics Power Properties Realty Robotics Semiconductor Software Solutions Staffing "
    "Systems Technologies Telecom Textiles Tooling Transport Ventures Water Wireless Aerospace Chemicals Devices"
).split()
LEGAL_SUFFIXES = ["Inc.", "LLC", "Corp.", "Ltd.", "LP", "GmbH", "S.A.", "B.V.", "plc", "Co."]
FIRST_NAMES = (
    "Aaron Abigail Adaeze Adrian Aisha Alan Alejandro Alice Amara Amir Ana Andre Anika Anton Aria Arjun Astrid "
    "Beatriz Benedict Bianca Bruno Caleb Camila Carlos Carmen Cedric Chen Chiara Clara Colin Dalia Damian Daniel "
    "Darius Delphine Diego Dmitri Eamon Edith Elena Elif Elliot Emeka Emil Esther Ethan Fatima Felix Fiona Gabriel "
    "Grace Hana Hannah Harriet Hassan Helena Henrik Hugo Ibrahim Ida Imani Ingrid Isaac Isabel Ivan Jada Jasper "
    "Javier Joanna Jonah Julia Kai Kamala Karim Katya Kenji Keziah Lars Leila Leon Liam Lina Lorenzo Lucia Magnus "
    "Malik Marco Margot Maria Marisol Mateo Maya Mei Milan Mira Naomi Nikhil Nina Noah Nora Oliver Olga Omar Oscar "
    "Paloma Pedro Petra Priya Rafael Rania Ravi Rebecca Renata Rohan Rosa Ruth Samir Sana Santiago Sara Selin Simone "
    "Sofia Soren Tariq Tessa Theo Tomas Uma Valentina Victor Vikram Wanjiru Xavier Yara Yusuf Zara Zoltan"
).split()
LAST_NAMES = (
    "Abernathy Adeyemi Alvarez Andersen Arslan Bachmann Balogun Barros Becker Bergstrom Bianchi Blackwood Bose "
    "Brennan Calloway Castellanos Chandra Chen Costa Dalgaard Delacroix Desai Dimitrov Donnelly Dubois Eriksen "
    "Espinoza Falk Farouk Ferreira Fitzgerald Fontaine Fujimoto Gallagher Garcia Gonzaga Gupta Halvorsen Hamada "
    "Hartmann Haugen Herrera Holloway Ibarra Iyer Jablonski Jensen Kagame Kapoor Kaur Kellerman Kim Kowalski Kuznetsov "
    "Lachance Lindqvist Lombardi Lopez MacAllister Mahmoud Marchetti Mbeki Mendoza Moreau Morales Nakamura Navarro "
    "Nguyen Novak Nwosu Okafor Olsen Ortega Osei Patel Pereira Petrov Quintero Rahman Ramirez Reyes Richter Rossi "
    "Saito Salazar Santos Schneider Sharma Silva Sorensen Stavros Sullivan Takahashi Tanaka Thorne Torres Valdez "
    "Vasquez Vogel Wagner Walsh Weber Whitfield Yamamoto Yilmaz Zhang Zielinski Zimmermann Achebe Brandt Cardoso"
).split()
CITIES = (
    "Austin|Boston|Chicago|Denver|Seattle|Atlanta|Phoenix|Portland|San Diego|Minneapolis|Raleigh|Columbus|Pittsburgh|"
    "Nashville|Salt Lake City|Charlotte|Dallas|Houston|Miami|Detroit|Baltimore|Sacramento|Omaha|Tucson|Milwaukee|"
    "Cleveland|Richmond|Boise|Madison|Toronto|London|Dublin|Amsterdam|Frankfurt|Singapore|Melbourne"
).split("|")
JURISDICTIONS = [
    "Delaware",
    "Delaware",
    "Delaware",
    "New York",
    "California",
    "Texas",
    "Nevada",
    "Massachusetts",
]
INDUSTRIES = {
    "industrial robotics": ["robotic arms", "motion controllers", "vision systems"],
    "medical devices": ["infusion pumps", "diagnostic sensors", "surgical instruments"],
    "enterprise software": ["analytics platform licences", "workflow software", "hosted services"],
    "specialty chemicals": ["industrial coatings", "adhesives", "catalysts"],
    "food manufacturing": ["packaged snacks", "frozen meals", "beverage concentrates"],
    "semiconductors": ["power management chips", "sensor modules", "RF components"],
    "logistics": ["freight forwarding services", "warehousing services", "last-mile delivery"],
    "renewable energy": ["solar inverters", "battery storage units", "charging stations"],
}
AGENCIES_ENV = [
    "State Department of Environmental Quality",
    "Regional Air Quality Management District",
    "State Water Resources Control Board",
    "County Environmental Health Department",
]
TAX_AGENCIES = [
    "California Franchise Tax Board",
    "New York State Department of Taxation and Finance",
    "Texas Comptroller of Public Accounts",
    "Internal Revenue Service",
    "Massachusetts Department of Revenue",
]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
ROLES = [
    "Vice President of Operations",
    "Controller",
    "General Counsel",
    "Director of Procurement",
    "Head of Engineering",
    "Treasurer",
    "Corporate Secretary",
    "Director of Sales",
    "Chief Technology Officer",
    "Human Resources Director",
    "Plant Manager",
    "Director of Finance",
]
NUMBER_WORDS = [
    "five",
    "ten",
    "fifteen",
    "twenty",
    "thirty",
    "forty-five",
    "sixty",
    "ninety",
    "one hundred twenty",
]


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def money(value: float) -> str:
    return f"${value:,.0f}"


def date_str(year: int, month: int, day: int) -> str:
    return f"{MONTHS[month - 1]} {day}, {year}"


# ---------------------------------------------------------------- boilerplate pool
_SUBJECTS = [
    "Each party",
    "The Company",
    "The Counterparty",
    "The receiving party",
    "Each of the parties",
    "The performing party",
    "The responsible party",
]
_PHRASES = [
    "shall comply with all applicable laws, rules and regulations in the performance of its obligations hereunder",
    "shall maintain complete and accurate books and records relating to the matters described in this Section",
    "shall use commercially reasonable efforts to perform its obligations in a timely and workmanlike manner",
    "shall keep confidential all non-public information disclosed to it in connection with this Agreement",
    "shall provide prompt written notice of any event that would reasonably be expected to delay performance",
    "shall cooperate in good faith to resolve any dispute through discussions between senior representatives",
    "acknowledges that it has not relied on any representation not expressly set out in this Agreement",
    "shall bear its own costs and expenses incurred in connection with the negotiation of this Agreement",
    "shall maintain insurance coverage of the types and in the amounts customary for its industry",
    "shall promptly correct any invoice error identified in the ordinary course of reconciliation",
    "may request reasonable supporting documentation for any charge presented for payment",
    "shall deliver the reports described in this Section within the periods customary for such reports",
]
BOILERPLATE = [f"{s} {p}." for s in _SUBJECTS for p in _PHRASES] + [
    "Headings are for convenience only and shall not affect the interpretation of this Agreement.",
    "This Agreement may be executed in counterparts, each of which shall be deemed an original.",
    "Any notice shall be in writing and delivered by hand, by courier or by electronic mail with confirmation.",
    "If any provision is held invalid, the remaining provisions shall continue in full force and effect.",
    "No failure or delay in exercising any right shall operate to relinquish that right.",
    "The words include and including shall be deemed to be followed by the words without limitation.",
    "All amounts are stated and payable in United States dollars unless otherwise specified.",
    "Time periods shall be computed by excluding the first day and including the last day.",
    "References to a statute include that statute as amended and any regulations made under it.",
    "Invoices not disputed in good faith within the review period shall be deemed accepted.",
    "Records shall be retained for the longer of seven years or the period required by applicable law.",
    "The parties shall meet at least quarterly to review performance against the agreed service levels.",
    "Performance reports shall be delivered in the format agreed by the relationship managers.",
    "Late payments shall bear interest at the rate of one percent per month or the maximum lawful rate.",
    "Delivery shall be made to the location specified in the applicable purchase order.",
    "Risk of loss shall pass upon delivery in accordance with the agreed shipping terms.",
    "Each party shall designate a relationship manager with authority to resolve operational matters.",
    "Any amendment must be in writing and signed by authorised representatives of both parties.",
    "Nothing in this Agreement creates a partnership, joint venture or agency relationship.",
    "The prevailing party in any action to enforce this Agreement may recover reasonable legal fees.",
]
HEADINGS = [
    "Definitions",
    "Term and Renewal",
    "Fees and Payment",
    "Delivery",
    "Acceptance",
    "Warranties",
    "Confidentiality",
    "Intellectual Property",
    "Limitation of Liability",
    "Insurance",
    "Notices",
    "Governing Law",
    "Dispute Resolution",
    "Force Majeure",
    "Audit Rights",
    "Compliance with Laws",
    "Data Protection",
    "Service Levels",
    "Records",
    "Taxes",
    "Non-Solicitation",
    "Publicity",
    "Subcontracting",
    "Forecasts",
    "Quality Assurance",
    "Reporting",
    "Personnel",
    "Security",
    "Business Continuity",
    "Miscellaneous",
]
REPORT_HEADINGS = [
    "Executive Summary",
    "Scope",
    "Background",
    "Methodology",
    "Observations",
    "Findings",
    "Analysis",
    "Recommendations",
    "Limitations",
    "Status",
    "Next Review",
    "Appendix",
]
PLEADING_HEADINGS = [
    "Parties",
    "Jurisdiction and Venue",
    "Factual Background",
    "First Cause of Action",
    "Second Cause of Action",
    "Damages",
    "Jury Demand",
]
MINUTES_SENTENCES = [
    "After discussion, upon motion duly made and seconded, the Board approved the resolution as presented.",
    "The directors asked questions about the assumptions used and management responded to each of them.",
    "The Board noted that the materials had been circulated to all directors in advance of the meeting.",
    "The Chair invited comments from each director, and no objections were raised.",
    "Management was directed to report back to the Board at its next regularly scheduled meeting.",
    "The Audit Committee chair summarised the committee's review of the matter for the full Board.",
    "It was noted that no director had an interest in the matter requiring disclosure.",
    "The Secretary confirmed that notice of the meeting had been duly given to all directors.",
]
DEFINED_TERMS = [
    (
        "Applicable Law",
        "means all laws, statutes, regulations and binding orders of any governmental authority",
    ),
    ("Business Day", "means a day other than a Saturday, Sunday or public holiday in the State of New York"),
    ("Confidential Information", "means all non-public information disclosed by a party, in any form"),
    ("Deliverables", "means the goods, services and work product to be provided under this Agreement"),
    ("Effective Date", "has the meaning given in the preamble"),
    ("Fees", "means the amounts payable under Schedule A, as adjusted in accordance with this Agreement"),
    ("Losses", "means losses, damages, liabilities, costs and expenses, including reasonable legal fees"),
    ("Specifications", "means the technical and functional specifications set out in Schedule B"),
    ("Term", "has the meaning given in Section 2"),
    ("Territory", "means the United States, Canada and such other countries as the parties agree in writing"),
]


class Names:
    """Unique company and person names for one room (no name plays two roles)."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        combos = [(p, n) for p in COMPANY_PREFIXES for n in COMPANY_NOUNS]
        rng.shuffle(combos)
        self._companies = combos
        people = [(f, ln) for f in FIRST_NAMES for ln in LAST_NAMES]
        rng.shuffle(people)
        self._people = people
        self._used_prefixes: set[str] = set()

    def company(self) -> tuple[str, str]:
        """(short name, legal name), e.g. ("Bluestone Logistics", "Bluestone Logistics LLC")."""
        while True:
            p, n = self._companies.pop()
            # one company per prefix keeps short names unambiguous inside memos
            if p in self._used_prefixes and len(self._used_prefixes) < len(COMPANY_PREFIXES):
                continue
            self._used_prefixes.add(p)
            short = f"{p} {n}"
            return short, f"{short} {self.rng.choice(LEGAL_SUFFIXES)}"

    def person(self) -> str:
        f, ln = self._people.pop()
        return f"{f} {ln}"


# lead sentences of ordinary paragraphs; {role}, {city} and {company} cost a draw each
LEADS = [
    "On {date}, {person} confirmed on behalf of {party} that the quarterly reconciliation showed no open items.",
    "Within {n} days after {date}, {party} shall deliver to {target} a statement of charges not exceeding {amt}.",
    "{person}, as {role}, is designated as the contact for {party} with effect from {date}.",
    "Payments of up to {amt} are due {n} days after receipt of a correct invoice issued on or after {date}.",
    "As of {date}, {party} reported {n} open service tickets, of which {n3} were classified as priority.",
    "The {city} facility of {party} shall hold safety stock of {stock:,} units from {date}.",
    "{party} and {target} agreed on {date} that the service credit cap for the period is {amt}.",
    "Forecasts covering {n} weeks shall be provided by {person} no later than {date} and monthly thereafter.",
    "An audit notice of {n} Business Days is required, and the audit of {date} was completed by {person}.",
    "For the year beginning {date}, the annual volume commitment of {party} is {volume:,} units valued at {amt}.",
    "Training for {n} personnel of {party} shall be completed in {city} by {date}.",
    "{person} of {company} certified on {date} that inventory counts matched to within {pct:.1f} percent.",
]


# ---------------------------------------------------------------- fast paragraph builder
class Writer:
    """Builds ordinary prose fast; lead sentences carry names, dates and numbers."""

    def __init__(self, rng: random.Random, target_short: str, people: list[str], companies: list[str]):
        self.rng = rng
        self.target = target_short
        self.people = people
        self.companies = companies
        self.dates = [
            date_str(y, m, d) for y in range(2015, 2025) for m in range(1, 13) for d in range(1, 29)
        ]

    def date(self) -> str:
        return self.dates[self.rng.randrange(len(self.dates))]

    def date_pair(self) -> tuple[str, str]:
        """Two dates, the first strictly earlier (an agreement and its later amendment)."""
        i, j = sorted(self.rng.sample(range(len(self.dates)), 2))
        return self.dates[i], self.dates[j]

    def lead(self, ref: str, party: str) -> str:
        """One sentence, prefixed by ``ref`` (a section number, or empty)."""
        body = self._lead(party)
        return f"{ref} {body}" if ref else body

    def _lead(self, party: str) -> str:
        r = self.rng
        person = self.people[r.randrange(len(self.people))]
        date = self.dates[r.randrange(len(self.dates))]
        n = r.randrange(2, 180)
        amt = f"${r.randrange(12, 9900) * 250:,}"
        template = LEADS[r.randrange(len(LEADS))]
        # a role, city or company is drawn only for the sentences that name one, after the choice
        extra = {
            key: pool[r.randrange(len(pool))]
            for key, pool in (("role", ROLES), ("city", CITIES), ("company", self.companies))
            if f"{{{key}}}" in template
        }
        return template.format(
            person=person,
            date=date,
            party=party,
            target=self.target,
            amt=amt,
            n=n,
            n3=n // 3,
            stock=n * 40,
            volume=n * 1000,
            pct=n / 10,
            **extra,
        )

    def paragraph(self, ref: str, party: str, pool: list[str] | None = None) -> str:
        r = self.rng
        return self.lead(ref, party) + " " + " ".join(r.sample(pool or BOILERPLATE, r.randrange(2, 5)))

    def sections(
        self,
        party: str,
        chars: int,
        start: int = 1,
        planted: list[tuple[str, str]] | None = None,
        headings: list[str] | None = None,
    ) -> tuple[list[str], dict[str, str]]:
        """Numbered sections adding up to about ``chars`` characters.

        ``planted`` is a list of (heading, clause text): each is placed as a
        sub-section at a random point of the document. Returns the section
        texts and each planted clause's section number, e.g. {"Termination": "9.2"}.
        """
        r = self.rng
        headings = headings or HEADINGS
        planted = list(planted or [])
        est = max(len(planted) + 1, chars // 2000)  # a section is ~2,000 characters
        slots = sorted(r.sample(range(est), len(planted))) if planted else []
        numbers: dict[str, str] = {}
        lo, hi = (3, 6) if chars > 6000 else (1, 3)  # short documents get short sections
        out: list[str] = []
        size = 0
        i = 0
        pi = 0
        while size < chars or pi < len(planted) or i == 0:  # at least one section, even when short
            sec = start + i
            if pi < len(planted) and (i >= slots[pi] or size >= chars):
                heading, clause = planted[pi]
                sub = r.randrange(lo - 1, hi - 1) if lo > 1 else r.randrange(0, 2)
                paras = [self.paragraph(f"{sec}.{j}", party) for j in range(1, sub + 1)]
                numbers[heading] = f"{sec}.{sub + 1}"
                paras.append(f"{sec}.{sub + 1} {clause}")
                paras.extend(
                    self.paragraph(f"{sec}.{j}", party) for j in range(sub + 2, sub + 2 + r.randrange(0, 2))
                )
                pi += 1
            else:
                heading = headings[(i + r.randrange(3)) % len(headings)]
                paras = [self.paragraph(f"{sec}.{j}", party) for j in range(1, r.randrange(lo, hi) + 1)]
            block = f"{sec}. {heading}\n\n" + "\n\n".join(paras)
            out.append(block)
            size += len(block)
            i += 1
        return out, numbers

    def table(self, title: str, columns: list[str], rows: int, row_fn) -> str:
        """A spreadsheet rendered as a pipe table."""
        head = "| " + " | ".join(columns) + " |\n|" + "|".join("---" for _ in columns) + "|"
        body = "\n".join("| " + " | ".join(row_fn(i)) + " |" for i in range(rows))
        return f"{title}\n\n{head}\n{body}\n"


def signature_block(names: list[tuple[str, str, str]]) -> str:
    """names: (entity, signatory, title)."""
    parts = [
        "IN WITNESS WHEREOF, the parties have executed this instrument as of the date first written above."
    ]
    for entity, person, title in names:
        parts.append(f"{entity.upper()}\nBy: /s/ {person}\nName: {person}\nTitle: {title}")
    return "\n\n".join(parts)


def definitions(writer: Writer, n: int) -> str:
    r = writer.rng
    terms = r.sample(DEFINED_TERMS, min(n, len(DEFINED_TERMS)))
    return "\n\n".join(f'1.{i} "{t}" {d}.' for i, (t, d) in enumerate(sorted(terms), 1))
