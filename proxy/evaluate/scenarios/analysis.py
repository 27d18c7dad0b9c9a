"""Scenario 5: data analysis in English with a polite user.

Twelve weeks of container spot rates as JSON, pandas tables, a missing library learned from a traceback, an
outlier week the agent decides to drop, figures the agent derives in its own prose, a data-export approval whose
id only the governance tool returns; mid-run the user asks, politely, for everything in EUR and corrects the
bunker surcharge.
"""

from __future__ import annotations

import random
import statistics
from datetime import date, timedelta

from .builder import Call, RunBuilder, Scenario, tool
from .noise import describe_text, frame_text, hex_id, json_text, markdown_table, pick_float

SEED = 1208
TRACE_ID = "scenario-analysis-freight-budget"
EUR_USD = 1.0842  # ECB reference of 2026-03-27, the agent's choice
WEEKS = 12
OUTLIER_WEEK = 7
LANES = ["CNSHA-NLRTM", "CNNGB-DEHAM", "CNYTN-GBFXT", "CNTAO-BEANR", "VNSGN-NLRTM", "INNSA-DEHAM"]
PROBED = ("1.0842", "14.5")

TOOLS = [
    tool("list_files", "List files in the analysis workspace.", {"path": "folder"}),
    tool("read_file", "Read a text file from the workspace.", {"path": "file path"}),
    tool("fetch_series", "Fetch a market data series (weekly spot rates, FX reference rates) as JSON.",
         {"source": "drewry|ecb", "series": "series name", "lanes": {"type": "array", "items": {"type": "string"}},
          "weeks": {"type": "integer"}}, optional=("lanes",)),
    tool("run_python", "Run Python in the analysis sandbox (pandas, numpy, matplotlib); returns stdout and stderr.",
         {"code": "Python source"}),
    tool("request_export", "Ask data governance to approve exporting files to a destination outside the sandbox.",
         {"destination": "where", "files": {"type": "array", "items": {"type": "string"}},
          "justification": "why"}),
    tool("export_status", "Read the status of a data-export request.", {"request_id": "request id"}),
    tool("export_files", "Export approved files to their destination.",
         {"request_id": "approved request id", "files": {"type": "array", "items": {"type": "string"}}}),
]

SYSTEM = """You are a data analyst agent for Nordlicht Living GmbH's finance team. You work in a Python sandbox
(pandas, numpy, matplotlib; no internet, no package installs) with read access to the team's workspace and
market-data feeds. Show your working, state assumptions, and keep numbers traceable to their source."""

TASK = """Hi! Could you build our Q3 ocean-freight budget per lane? Use the last twelve weeks of spot rates (Drewry,
USD per FEU) for our six Asia–Europe lanes, project them into Q3, apply the 12% bunker surcharge from our forwarder
contract, and multiply by the Q3 volumes in volumes_q3.csv. When it's done, the CSV should go to the finance
SharePoint (board pack folder). A short summary with the key figures would be great."""


def rates(rng: random.Random) -> dict[str, list[float | None]]:
    """Weekly USD/FEU per lane: a level, a trend, noise; week 7 spikes (a diversion), NGB-HAM lacks week 11."""
    series: dict[str, list[float | None]] = {}
    for lane in LANES:
        level, slope = rng.uniform(1800, 3200), rng.uniform(-25, 55)
        values: list[float | None] = []
        for week in range(1, WEEKS + 1):
            value = level + slope * week + rng.uniform(-60, 60)
            if week == OUTLIER_WEEK:
                value *= rng.uniform(1.32, 1.41)
            values.append(pick_float(rng, value - 0.5, value + 0.5, 2, avoid=PROBED))
        if lane == "CNNGB-DEHAM":
            values[10] = None
        series[lane] = values
    return series


def weeks() -> list[str]:
    return [(date(2026, 1, 5) + timedelta(weeks=n)).isoformat() for n in range(WEEKS)]


def fit(values: list[float | None], drop: int | None) -> tuple[float, float]:
    """Least-squares slope and intercept over the weeks present (weeks count from 1)."""
    points = [(week, value) for week, value in enumerate(values, 1) if value is not None and week != drop]
    xs, ys = [float(w) for w, _ in points], [float(v) for _, v in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return slope, my - slope * mx


def projection(values: list[float | None]) -> float:
    """Q3 rate: the trend (without the outlier week) at week 20, the middle of the projection horizon."""
    slope, intercept = fit(values, OUTLIER_WEEK)
    return intercept + slope * 20


def volumes(rng: random.Random) -> dict[str, list[int]]:
    return {lane: [rng.randint(8, 70) for _ in range(3)] for lane in LANES}


def budget_rows(series: dict[str, list[float | None]], volume: dict[str, list[int]], baf: float,
                fx: float | None) -> list[list[object]]:
    rows = []
    for lane in LANES:
        rate = projection(series[lane])
        feu = sum(volume[lane])
        usd = rate * (1 + baf) * feu
        rows.append([lane, round(rate, 2), feu, round(usd, 2)] + ([round(usd / fx, 2)] if fx else []))
    return rows


def series_json(rng: random.Random, series: dict[str, list[float | None]], lanes: list[str]) -> str:
    payload = {"source": "Drewry World Container Index (lane detail)", "unit": "USD/FEU", "frequency": "weekly",
               "retrieved": "2026-03-30T07:12:44Z", "lanes": {}}
    for lane in lanes:
        points = []
        for day, value in zip(weeks(), series[lane]):
            if value is None:
                points.append({"week": day, "rate": None, "status": "not published"})
                continue
            points.append({"week": day, "rate": value, "low": round(value * rng.uniform(0.9, 0.97), 2),
                           "high": round(value * rng.uniform(1.03, 1.1), 2), "n_quotes": rng.randint(6, 31)})
        payload["lanes"][lane] = points  # type: ignore[index]
    payload["request_id"] = hex_id(rng, 20)
    return json_text(payload, indent=1)


def fx_json(rng: random.Random) -> str:
    points = []
    last = date(2026, 3, 27)
    day = date(2026, 1, 5)
    while day <= last:
        if day.weekday() < 5:
            value = EUR_USD if day == last else pick_float(rng, 1.0620, 1.0960, 4, avoid=PROBED)
            points.append({"date": day.isoformat(), "EURUSD": value, "obs_status": "A"})
        day += timedelta(days=1)
    return json_text({"dataset": "EXR.D.USD.EUR.SP00.A", "source": "ECB", "unit": "USD per EUR",
                      "observations": points, "note": "Friday reference rates; 2026-03-27 is the latest fixing",
                      "request_id": hex_id(rng, 20)}, indent=1)


def volumes_csv(rng: random.Random, volume: dict[str, list[int]]) -> str:
    lines = ["# Q3 2026 planned volumes (FEU) — S&OP cycle 2026-03, owner: supply planning (m.hoffmann)",
             "# months: Jul, Aug, Sep; includes 8% safety margin; excludes the new Gdansk lane (volumes TBD)",
             "lane,origin,destination,jul_feu,aug_feu,sep_feu,forwarder,contract,notes"]
    for lane in LANES:
        origin, destination = lane.split("-")
        lines.append(f"{lane},{origin},{destination},{volume[lane][0]},{volume[lane][1]},{volume[lane][2]},"
                     f"{rng.choice(['Kuehne+Nagel', 'DSV', 'DB Schenker'])},FWD-2026-{rng.randint(10, 99)},"
                     f"{rng.choice(['', 'peak season surcharge possible', 'reefer share 0', 'NVOCC option'])}")
    lines.append("PLGDN-CNSHA,PLGDN,CNSHA,,,,tbd,,new lane — volumes TBD")
    return "\n".join(lines)


def listing(rng: random.Random) -> str:
    files = [("volumes_q3.csv", 1204), ("contracts/FWD-2026-41.pdf", 318_442), ("contracts/FWD-2026-57.pdf", 290_114),
             ("history/spot_2025.csv", 88_219), ("history/budget_q3_2025.xlsx", 61_330),
             ("board_pack/README.md", 2_011), ("board_pack/template_q3.xlsx", 44_871), ("notebooks/old_fx.ipynb", 19_284)]
    return json_text({"path": "/workspace/freight/", "files": [{"name": name, "size": size, "modified":
                                                                f"2026-03-{rng.randint(2, 27):02d}T{rng.randint(7, 19):02d}:"
                                                                f"{rng.randint(0, 59):02d}:00Z", "owner": rng.choice(
                                                                    ["m.hoffmann", "a.keller", "finance-bot"])}
                                                               for name, size in files]})


def frame_of(series: dict[str, list[float | None]]) -> str:
    rows = [[("NaN" if series[lane][n] is None else series[lane][n]) for lane in LANES] for n in range(WEEKS)]
    return frame_text([lane.split("-")[0][2:] + "-" + lane.split("-")[1][2:] for lane in LANES], rows,
                      index=weeks())


def describe_of(series: dict[str, list[float | None]]) -> str:
    columns = {lane.split("-")[0][2:] + "-" + lane.split("-")[1][2:]: [v for v in series[lane] if v is not None]
               for lane in LANES}
    return describe_text(columns, decimals=2)


def changes_table(series: dict[str, list[float | None]]) -> str:
    rows = []
    for n in range(1, WEEKS):
        row = []
        for lane in LANES:
            now, before = series[lane][n], series[lane][n - 1]
            row.append("NaN" if now is None or before is None else f"{100 * (now / before - 1):+.1f}%")
        rows.append(row)
    return frame_text([lane.split("-")[0][2:] + "-" + lane.split("-")[1][2:] for lane in LANES], rows,
                      index=weeks()[1:])


def short(lane: str) -> str:
    return lane.split("-")[0][2:] + "-" + lane.split("-")[1][2:]


LOAD_CODE = """import json, pandas as pd
frames = []
for part in ('wci_part1.json', 'wci_part2.json'):
    data = json.load(open(part))
    for lane, points in data['lanes'].items():
        frames.append(pd.DataFrame(points).assign(lane=lane))
raw = pd.concat(frames)
df = raw.pivot(index='week', columns='lane', values='rate')
df.columns = [c[2:5] + '-' + c[8:] for c in df.columns]
print(df)
print()
print(df.describe())"""

POLYFIT_CODE = """import numpy as np
weeks = np.arange(1, 13)
keep = weeks != 7
slope, intercept = {}, {}
for lane in df:
    y = df[lane].values
    ok = keep & ~np.isnan(y)
    slope[lane], intercept[lane] = np.polyfit(weeks[ok], y[ok], 1)
print(pd.DataFrame({'slope_usd_per_week': slope, 'intercept': intercept, 'n_weeks': {l: int((keep & ~np.isnan(df[l].values)).sum()) for l in df}}).round(2))"""

BUDGET_CODE = """vol = pd.read_csv('volumes_q3.csv', comment='#').dropna(subset=['jul_feu'])
vol['q3_feu'] = vol[['jul_feu', 'aug_feu', 'sep_feu']].sum(axis=1)
BAF = {baf}
budget = pd.DataFrame({{'q3_usd_feu': pd.Series(proj)}})
budget['q3_feu'] = vol.set_index('lane').q3_feu.rename(index=short)
budget['usd'] = budget.q3_usd_feu * (1 + BAF) * budget.q3_feu
budget['eur'] = budget.usd / EURUSD
print(budget.round(2))
print('total EUR', round(budget.eur.sum(), 2))"""


def contract_text(rng: random.Random) -> str:
    return """[pdf → text, 6 pages, OCR confidence 0.97]
FREIGHT FORWARDING AGREEMENT FWD-2026-41 — Nordlicht Living GmbH ("Customer") and DSV Ocean Transport A/S
("Forwarder"), valid 2026-01-01 to 2026-12-31.

§1 Scope. Ocean transport of FCL shipments (20'DV, 40'DV, 40'HC) from the ports of loading listed in Annex A to
the ports of discharge listed in Annex B, including origin handling and export customs clearance.

§2 Rates. Base ocean freight is indexed weekly to the Drewry World Container Index lane detail (WCI), USD per FEU,
minus the discount in Annex C. The index week is the week of the vessel's departure.

§3 Surcharges.
  3.1 Bunker adjustment factor (BAF): 12% of the base ocean freight. The BAF percentage is reviewed by the parties
      every quarter against the VLSFO Rotterdam/Singapore average and may be amended by written agreement
      (e-mail suffices).
  3.2 Peak season surcharge (PSS): as announced by the carrier, passed through at cost, only between 15 July and
      31 October, capped at USD 300 per FEU.
  3.3 Emergency surcharges (war risk, canal diversion): passed through at cost with 14 days' notice.
  3.4 Terminal handling at destination (DTHC): invoiced separately by the destination agent, not part of this
      agreement.

§4 Currency. Invoices in USD; the Customer may pay in EUR at the ECB reference rate of the invoice date.

§5 Payment. 30 days from invoice date. Late payment interest per §288 BGB.

§6 Volumes. The Customer's forecast in Annex D is non-binding; the Forwarder guarantees space for 110% of the
forecast per lane and month.

§7 Liability. Per the Hague-Visby Rules; cargo insurance is the Customer's responsibility.

Annex C — discounts on WCI: CNSHA–NLRTM 4.0%, CNNGB–DEHAM 3.0%, CNYTN–GBFXT 2.5%, CNTAO–BEANR 3.0%,
VNSGN–NLRTM 2.0%, INNSA–DEHAM 1.5%.
Annex D — see volumes file of the current S&OP cycle.
Signed Copenhagen / Hamburg, 2025-12-12.""" + f"\n[document id {hex_id(rng, 16)}]"


def quotes_json(rng: random.Random, series: dict[str, list[float | None]]) -> str:
    rows = []
    for day, value in zip(weeks(), series["CNSHA-NLRTM"]):
        for _ in range(6):
            base = float(value or 0)
            rows.append({"week": day, "quote": round(base * rng.uniform(0.93, 1.07), 2),
                         "carrier": rng.choice(["MSCU", "MAEU", "CMDU", "COSU", "HLCU", "ONEY", "EGLV"]),
                         "type": rng.choice(["spot", "spot", "FAK"])})
    return json_text({"series": "wci_quotes", "lane": "CNSHA-NLRTM", "unit": "USD/FEU", "quotes": rows,
                      "request_id": hex_id(rng, 20)}, indent=None)


def bunker_json(rng: random.Random) -> str:
    points = [{"week": day, "rotterdam_usd_t": round(rng.uniform(540, 640), 1),
               "singapore_usd_t": round(rng.uniform(560, 670), 1), "spread": round(rng.uniform(-40, 20), 1)}
              for day in weeks()]
    return json_text({"series": "bunker_vlsfo", "unit": "USD/t", "points": points,
                      "quarter_average": {"Q4-2025": 588.2, "Q1-2026": 604.7},
                      "request_id": hex_id(rng, 20)}, indent=1)


def congestion_json(rng: random.Random) -> str:
    ports = ["NLRTM", "DEHAM", "GBFXT", "BEANR"]
    points = [{"week": day, **{port: {"vessels_waiting": rng.randint(0, 18),
                                      "avg_wait_days": round(rng.uniform(0.2, 4.5), 1)} for port in ports}}
              for day in weeks()]
    return json_text({"series": "port_congestion", "points": points, "request_id": hex_id(rng, 20)}, indent=1)


def monthly_table(series: dict[str, list[float | None]], volume: dict[str, list[int]]) -> str:
    rows = []
    for lane in LANES:
        rate = projection(series[lane]) * 1.145 / EUR_USD
        rows.append([round(rate * feu, 2) for feu in volume[lane]])
    totals = [round(sum(r[i] for r in rows), 2) for i in range(3)]
    shares = [[f"{100 * value / sum(totals):.1f}%" for value in row] for row in rows + [totals]]
    return (frame_text(["jul_feu", "aug_feu", "sep_feu"], rows + [totals], index=[short(l) for l in LANES] + ["total"])
            + "\n\nshare of Q3 total:\n" + frame_text(["jul", "aug", "sep"], shares,
                                                        index=[short(l) for l in LANES] + ["total"]))


def info_and_bands(rng: random.Random, series: dict[str, list[float | None]]) -> str:
    info = ("<class 'pandas.core.frame.DataFrame'>\nIndex: 12 entries, 2026-01-05 to 2026-03-23\n"
            "Data columns (total 6 columns):\n #   Column   Non-Null Count  Dtype  \n---  ------   "
            "--------------  -----  \n" + "\n".join(
                f" {n}   {short(lane)}  {sum(v is not None for v in series[lane])} non-null     float64"
                for n, lane in enumerate(LANES)) + "\ndtypes: float64(6)\nmemory usage: 672.0+ bytes\n")
    rows = []
    for n in range(WEEKS):
        row = []
        for lane in LANES:
            value = series[lane][n]
            row += ["NaN", "NaN"] if value is None else [round(value * rng.uniform(0.9, 0.97)),
                                                         round(value * rng.uniform(1.03, 1.1))]
        rows.append(row)
    headers = [f"{kind}_{short(lane)}" for lane in LANES for kind in ("lo", "hi")]
    return info + "\n" + frame_text(headers, rows, index=weeks(), decimals=0)


def volumes_2025(rng: random.Random) -> str:
    lines = ["lane,month,planned_feu,actual_feu,variance_pct,notes"]
    for lane in LANES:
        for month in ("2025-07", "2025-08", "2025-09"):
            planned = rng.randint(10, 70)
            actual = max(0, planned + rng.randint(-9, 12))
            lines.append(f"{lane},{month},{planned},{actual},{100 * (actual / planned - 1):+.1f},"
                         f"{rng.choice(['', '', 'rolled cargo', 'blank sailing', 'PSS applied', 'split shipment'])}")
    return "\n".join(lines)


def note_text(series: dict[str, list[float | None]], volume: dict[str, list[int]]) -> str:
    rows = budget_rows(series, volume, 0.145, EUR_USD)
    return ("# Q3 2026 ocean-freight budget\n\nAssumptions: Drewry WCI lane detail, 12 weeks to 2026-03-23, linear "
            "trend without the diversion week, projected to week 20; bunker surcharge per forwarder (amended); ECB "
            "reference of the last Friday.\n\n"
            + markdown_table(["lane", "Q3 FEU", "rate USD/FEU", "budget EUR"],
                             [[short(str(r[0])), r[2], r[1], r[4]] for r in rows])
            + "\n\nSensitivity (EUR): rates −10% / base / +10% against peak 0% / 6% / 11%, in the CSV's second "
              "block; the peak-season scenario refits the trend on weeks 5–12.\n\nMethod: weekly index values per "
              "lane, linear least-squares trend, projected to the middle of the horizon; contract discounts not yet "
              "applied (conservative). Volumes from the S&OP cycle 2026-03 including the 8% safety margin.\n\n"
              "Open items listed in the cover mail.")


def contract_57(rng: random.Random) -> str:
    return ("[pdf → text, 4 pages, OCR confidence 0.95]\nRAHMENVERTRAG SEEFRACHT FWD-2026-57 — Nordlicht Living GmbH "
            "und Kuehne + Nagel (AG & Co.) KG, Laufzeit 01.01.–31.12.2026.\n\n§1 Leistungsumfang: FCL-Seefracht ab "
            "den Ladehäfen gemäß Anlage A, inkl. Vorlauf und Exportverzollung.\n§2 Raten: Basisfracht gemäß Drewry "
            "WCI (USD/FEU) abzüglich Rabatt laut Anlage C.\n§3 Zuschläge: BAF gemäß Hauptvertrag FWD-2026-41 "
            "(Gleichlauf-Klausel); PSS zu Selbstkosten, gedeckelt auf USD 300/FEU; Notfallzuschläge mit 14 Tagen "
            "Vorankündigung.\n§4 Währung: Rechnungsstellung in USD; Zahlung in EUR zum EZB-Referenzkurs des "
            "Rechnungsdatums zulässig.\n§5 Zahlungsziel: 30 Tage.\n§6 Haftung: HGB / Haag-Visby.\n\nAnlage C — "
            "Rabatte: CNTAO–BEANR 3,0 %, VNSGN–NLRTM 2,0 %.\nAnlage E — Ansprechpartner: "
            + ", ".join(f"{name} (+49 40 {rng.randint(1000000, 9999999)})" for name in
                        ("J. Petersen", "M. Yilmaz", "S. Brandt")) + f"\n[document id {hex_id(rng, 16)}]")


def yoy_table(rng: random.Random) -> str:
    rows = [[f"{rng.uniform(-35, 25):+.1f}" for _ in range(3)] for _ in range(WEEKS)]
    stats = describe_text({short(lane): [rng.uniform(-35, 25) for _ in range(WEEKS)] for lane in LANES[:3]}, 2)
    return frame_text([short(l) for l in LANES[:3]], rows, index=weeks()) + "\n\n" + stats


def template_text(rng: random.Random) -> str:
    return ("[xlsx → text] sheet 'Freight' (A1:K20)\n"
            + markdown_table(["Lane", "Q3 FEU", "Rate basis", "Rate USD/FEU", "BAF %", "PSS", "FX", "Budget EUR",
                              "Jul EUR", "Aug EUR", "Sep EUR"], [[short(l)] + [""] * 10 for l in LANES])
            + "\n\n[sheet 'Sensitivity'] rows: rates −10% / base / +10%; columns: peak 0% / 6% / 11%\n"
            + "[sheet 'Assumptions'] A2: index source; A3: FX source and date; A4: surcharges; A5: open items\n"
            + "[sheet 'Checks'] " + "; ".join(f"C{n}: =SUM(Freight!H2:H7)-Freight!H8 (must be 0)" for n in range(2, 6))
            + f"\n[workbook] template version 2026.1, owner a.keller, checksum {hex_id(rng, 12)}")


def csv_preview(series: dict[str, list[float | None]], volume: dict[str, list[int]]) -> str:
    lines = ["lane,q3_feu,rate_usd_feu,baf_pct,fx_usd_per_eur,jul_eur,aug_eur,sep_eur,budget_eur"]
    for row in budget_rows(series, volume, 0.145, EUR_USD):
        lane = str(row[0])
        months = [float(row[1]) * 1.145 * feu / EUR_USD for feu in volume[lane]]  # type: ignore[arg-type]
        lines.append(f"{short(lane)},{row[2]},{row[1]},14.50,{EUR_USD},"
                     + ",".join(f"{m:.2f}" for m in months) + f",{row[4]}")
    return "\n".join(lines)


def export_requested(rng: random.Random) -> str:
    return json_text({"request_id": "DG-2026-0331", "status": "pending_review", "queue": "data-governance",
                      "destination": "sharepoint://finance/board-pack/2026-Q3/",
                      "files": ["q3_freight_budget.csv", "q3_freight_budget.md"], "classification": "internal",
                      "checks": [{"check": "personal_data_scan", "result": "pending"},
                                 {"check": "destination_allowed", "result": "pass"},
                                 {"check": "retention_policy", "result": "pass (7y finance)"}],
                      "sla_hours": 4, "submitted_by": "analysis-agent", "submitted_at": "2026-03-30T07:10:02Z",
                      "reviewers": ["k.brandt (DPO office)", "finance-data-stewards"],
                      "policy_refs": ["DG-POL-7 external sharing", "DG-POL-12 contract confidentiality",
                                      "FIN-STD-3 board pack retention"],
                      "lineage": [{"input": "drewry/wci_lane_detail", "licence": "internal use, aggregates may be "
                                                                               "shared internally"},
                                  {"input": "ecb/EXR", "licence": "public"},
                                  {"input": "workspace/freight/volumes_q3.csv", "licence": "internal"}],
                      "reviewer_notes": None, "audit_id": "aud_" + hex_id(rng, 12)})


def export_approved(rng: random.Random) -> str:
    return json_text({"request_id": "DG-2026-0331", "status": "approved", "approved_by": "k.brandt",
                      "checks": [{"check": "personal_data_scan", "result": "pass (0 findings)"},
                                 {"check": "destination_allowed", "result": "pass"},
                                 {"check": "retention_policy", "result": "pass (7y finance)"},
                                 {"check": "licence_review", "result": "pass with condition"}],
                      "reviewer_comment": "Index-derived aggregates are fine for internal board use; do not include "
                                          "carrier-level quotes or contract discounts per carrier.",
                      "approved_at": "2026-03-30T09:28:51Z",
                      "conditions": ["aggregated figures only; no carrier-level contract rates"],
                      "valid_until": "2026-04-06T09:28:51Z", "files": ["q3_freight_budget.csv",
                                                                      "q3_freight_budget.md"],
                      "audit": [{"at": "2026-03-30T07:10:02Z", "event": "submitted"},
                                {"at": "2026-03-30T07:10:05Z", "event": "auto-checks passed"},
                                {"at": "2026-03-30T09:28:51Z", "event": "approved", "by": "k.brandt"}]})


def statsmodels_error() -> str:
    return """Traceback (most recent call last):
  File "/sandbox/cell_9.py", line 1, in <module>
    import statsmodels.api as sm
ModuleNotFoundError: No module named 'statsmodels'

[sandbox] packages available: numpy 1.26.4, pandas 2.2.1, matplotlib 3.8.3, scipy (not installed),
          pyarrow 15.0.2, openpyxl 3.1.2. Network access: disabled. pip: disabled by policy.
[sandbox] kernel: python 3.11.8, memory limit 4 GiB, cpu 2, timeout 120 s per cell
[sandbox] cell 9 failed after 0.04 s; variables from cells 1-8 are kept:
  df            DataFrame (12, 6) float64
  raw           DataFrame (72, 6) mixed
  frames        list (6)
  data          dict (5 keys)
  json, pd      modules
[sandbox] hint: to fit a linear trend without statsmodels, numpy.polyfit(x, y, 1) or
          numpy.linalg.lstsq are available; for robust fits, a manual Theil-Sen is ~10 lines.
"""


def slopes_table(series: dict[str, list[float | None]]) -> str:
    rows = []
    for lane in LANES:
        slope, intercept = fit(series[lane], OUTLIER_WEEK)
        rows.append([round(slope, 2), round(intercept, 2), sum(1 for n, v in enumerate(series[lane], 1)
                                                               if v is not None and n != OUTLIER_WEEK)])
    fitted = [[round(fit(series[lane], OUTLIER_WEEK)[1] + fit(series[lane], OUTLIER_WEEK)[0] * week, 2)
               for lane in LANES] for week in range(1, WEEKS + 1)]
    return (frame_text(["slope_usd_per_week", "intercept", "n_weeks"], rows, index=[short(l) for l in LANES])
            + "\n\nfitted values (USD/FEU):\n" + frame_text([short(l) for l in LANES], fitted, index=weeks()))


def projection_table(series: dict[str, list[float | None]]) -> str:
    rows = [[round(projection(series[lane]), 2)] for lane in LANES]
    horizon = [[round(fit(series[lane], OUTLIER_WEEK)[1] + fit(series[lane], OUTLIER_WEEK)[0] * week, 2)
                for lane in LANES] for week in range(13, 21)]
    return frame_text(["q3_usd_feu"], rows, index=[short(l) for l in LANES]) + "\n\ntrend path:\n" + frame_text(
        [short(l) for l in LANES], horizon, index=[f"wk{w}" for w in range(13, 21)]) + "\n\n" + frame_text(
        ["wk12_actual", "trend_wk12", "trend_wk20"],
        [[series[lane][-1] if series[lane][-1] is not None else "NaN",
          round(fit(series[lane], OUTLIER_WEEK)[1] + fit(series[lane], OUTLIER_WEEK)[0] * 12, 2),
          round(projection(series[lane]), 2)] for lane in LANES], index=[short(l) for l in LANES])


def eur_table(series: dict[str, list[float | None]]) -> str:
    rows = [[round(projection(series[lane]), 2), round(projection(series[lane]) / EUR_USD, 2)] for lane in LANES]
    recent = [[("NaN" if series[lane][n] is None else round(float(series[lane][n] or 0) / EUR_USD, 2))
               for lane in LANES] for n in range(WEEKS - 4, WEEKS)]
    return (frame_text(["usd_feu", "eur_feu"], rows, index=[short(l) for l in LANES])
            + "\n\nlast four weeks in EUR/FEU:\n" + frame_text([short(l) for l in LANES], recent,
                                                                 index=weeks()[-4:]))


def budget_table(series: dict[str, list[float | None]], volume: dict[str, list[int]], baf: float) -> str:
    rows = budget_rows(series, volume, baf, EUR_USD)
    table = frame_text(["q3_usd_feu", "q3_feu", "usd", "eur"], [r[1:] for r in rows],
                       index=[short(str(r[0])) for r in rows])
    detail = frame_text(["base_usd", "baf_usd", "jul_eur", "aug_eur", "sep_eur"],
                        [[round(float(r[1]) * int(r[2]), 2), round(float(r[1]) * int(r[2]) * baf, 2)]  # type: ignore
                         + [round(float(r[1]) * (1 + baf) * feu / EUR_USD, 2) for feu in volume[str(r[0])]]
                         for r in rows], index=[short(str(r[0])) for r in rows])
    table = table + "\n\n" + detail
    return table + f"\ntotal EUR {sum(float(r[4]) for r in rows):.2f}"  # type: ignore[arg-type]


def history_csv(rng: random.Random, lanes: list[str]) -> str:
    lines = ["week,lane,rate,low,high,n_quotes"]
    start = date(2025, 4, 7)
    for n in range(26 if len(lanes) < 4 else 22):
        day = start + timedelta(weeks=n)
        for lane in lanes:
            value = rng.uniform(1500, 3400) * (1.08 if n >= 13 else 1.0)
            lines.append(f"{day.isoformat()},{lane},{value:.2f},{value * 0.94:.2f},{value * 1.06:.2f},"
                         f"{rng.randint(5, 30)}")
    return "\n".join(lines)


def seasonality(rng: random.Random) -> str:
    uplift = frame_text(["q3_vs_q2_pct"], [[round(rng.uniform(5.8, 11.2), 1)] for _ in LANES],
                        index=LANES)
    means = frame_text(["1", "2", "3", "4"], [[round(rng.uniform(1600, 3200), 2) for _ in range(4)]
                                              for _ in LANES], index=LANES)
    return uplift + "\nName: rate, dtype: float64\n\nquarter\n" + means


def budget_2025(rng: random.Random) -> str:
    rows = [[lane, rng.randint(40, 190), round(rng.uniform(1500, 2900), 2), round(rng.uniform(0.10, 0.13), 3),
             round(rng.uniform(150000, 520000), 2), round(rng.uniform(140000, 560000), 2)] for lane in LANES[:5]]
    return ("[xlsx → text] sheet 'Budget Q3 2025' (A1:G12)\n"
            + markdown_table(["lane", "feu", "usd_feu", "baf", "budget_eur", "actual_eur"], rows)
            + "\n\n[sheet 'Sensitivity'] rates −10% / base / +10% × peak 0% / 8%\n"
            + markdown_table(["rates", "peak 0%", "peak 8%"], [[label, round(rng.uniform(1.1e6, 1.9e6), 2),
                                                                round(rng.uniform(1.2e6, 2.1e6), 2)]
                                                               for label in ("-10%", "base", "+10%")])
            + "\n\n[sheet 'Notes'] FX: ECB reference of the last Friday before submission. BAF per forwarder "
              "contract. Prepared by a.keller, reviewed by CFO office 2025-06-24.")


def sensitivity(rng: random.Random, total: float) -> str:
    rows = []
    for shock in (-0.1, 0.0, 0.1):
        rows.append([round(total * (1 + shock) * (1 + peak), 2) for peak in (0.0, 0.06, 0.11)])
    grid = frame_text(["peak_0", "peak_6", "peak_11"], rows, index=["rates-10%", "rates+0%", "rates+10%"])
    per_lane = frame_text(["base", "low", "high"], [[round(v, 2), round(v * 0.9, 2), round(v * 1.221, 2)]
                                                      for v in (rng.uniform(80000, 600000) for _ in LANES)],
                          index=[short(l) for l in LANES])
    return grid + "\n\n" + per_lane


def carriers(rng: random.Random, lanes: list[str]) -> str:
    data = {}
    for lane in lanes:
        data[lane] = [{"week": day, "carriers": [{"scac": scac, "rate": round(rng.uniform(1600, 3300), 2),
                                                  "share": round(rng.uniform(0.05, 0.3), 2)}
                                                 for scac in ("MSCU", "MAEU", "CMDU", "COSU", "HLCU", "ONEY")]}
                       for day in weeks()[-4:]]
    return json_text({"series": "carrier_breakdown", "unit": "USD/FEU", "lanes": data,
                      "request_id": hex_id(rng, 20)}, indent=1)


def plot_output(rng: random.Random) -> str:
    return ("/sandbox/lib/python3.11/site-packages/pandas/plotting/_matplotlib/core.py:1440: UserWarning: "
            "Attempting to set identical low and high xlims makes transformation singular; automatically "
            "expanding.\n  ax.set_xlim(left, right)\nsaved rates.png (1350x600, "
            f"{rng.randint(60, 140)} kB)\n<Figure size 900x400 with 1 Axes>\n"
            + "\n".join(f"Line2D({short(lane)}): {WEEKS} points, color=C{n}, lw=1.5" for n, lane in enumerate(LANES))
            + "\nLine2D(_child6): axvline at 2026-02-16, ls=':', color='grey'\n"
              "Legend: 6 entries, loc='upper left', frameon=False\n"
              "Axes: xlabel='week', ylabel='USD/FEU', title='Drewry WCI lane detail, 12 weeks'")


def residuals(rng: random.Random, series: dict[str, list[float | None]]) -> str:
    rows, columns = [], {short(l): [] for l in LANES}  # type: dict[str, list[float]]
    for n in range(WEEKS):
        row = []
        for lane in LANES:
            value = series[lane][n]
            if value is None:
                row.append("NaN")
                continue
            slope, intercept = fit(series[lane], OUTLIER_WEEK)
            residual = round(value - (intercept + slope * (n + 1)), 2)
            row.append(residual)
            columns[short(lane)].append(residual)
        rows.append(row)
    return frame_text([short(l) for l in LANES], rows, index=weeks()) + "\n\n" + describe_text(columns, 2)


def board_readme() -> str:
    return """# Board pack — freight section

Each quarter's pack has:

1. A per-lane budget table (EUR): lane, Q3 FEU, rate basis, surcharges, budget.
2. A sensitivity block: rates −10% / base / +10% against a peak-season uplift.
3. A *peak-season scenario*: trend refitted on the most recent eight weeks only (weeks 5–12), because the
   early-quarter weeks tend to understate momentum going into Q3.
4. Open items: anything not confirmed by the forwarders or supply planning, listed explicitly.

Figures: EUR, two decimals, thousands separators. FX and surcharge assumptions stated once, at the top.
Files go to sharepoint://finance/board-pack/<quarter>/ after data-governance approval (DG request).
Contact: a.keller (FP&A), m.hoffmann (supply planning).

## Conventions

- Lane names as ORIGIN–DESTINATION with UN/LOCODE port codes (e.g. CNSHA–NLRTM), short form allowed in tables.
- One row per lane; new lanes without volumes are listed under open items, not as zero rows.
- Rates: index basis first, then contract discounts (Annex C of the forwarder agreements), then surcharges.
- Scenario naming: "base", "peak", "stress"; the stress case is optional and only on request of the CFO office.

## Review

The CFO office reviews the pack on the Thursday before the board meeting. Changes after review need a new
version number in the file name (v2, v3, ...) and a one-line change note at the top of the summary."""


def refit_table(rng: random.Random, series: dict[str, list[float | None]]) -> str:
    rows = []
    for lane in LANES:
        points = [(n, v) for n, v in enumerate(series[lane], 1) if v is not None and n >= 5 and n != OUTLIER_WEEK]
        xs, ys = [float(n) for n, _ in points], [float(v) for _, v in points]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        rows.append([round(slope, 2), round(my - slope * mx + slope * 20, 2), len(points)])
    peak = [[round(float(r[1]) * rng.uniform(0.98, 1.02), 2) for r in rows] for _ in range(6)]
    return (frame_text(["slope_wk5_12", "q3_usd_feu_peak", "n"], rows, index=[short(l) for l in LANES])
            + "\n\nweekly path, weeks 15-20 (USD/FEU):\n"
            + frame_text([short(l) for l in LANES], peak, index=[f"wk{w}" for w in range(15, 21)]))


def pack_listing(rng: random.Random) -> str:
    return json_text({"path": "/workspace/freight/board_pack/", "files": [
        {"name": name, "size": rng.randint(1000, 90000), "modified": f"2026-03-{rng.randint(20, 30)}T0"
                                                                      f"{rng.randint(7, 9)}:{rng.randint(10, 59)}:00Z",
         "owner": rng.choice(["a.keller", "analysis-agent", "m.hoffmann"]), "version": rng.randint(1, 6),
         "sha256": hex_id(rng, 16), "locked": False}
        for name in ("README.md", "template_q3.xlsx", "rates.png", "q3_freight_budget_draft.csv", "notes.md",
                     "archive/q2_freight_budget_v3.csv", "archive/q2_freight_budget_v3.md")]})


def build() -> Scenario:
    rng = random.Random(SEED)
    series = rates(rng)
    volume = volumes(rng)
    slope_sha = fit(series["CNSHA-NLRTM"], OUTLIER_WEEK)[0]
    run = RunBuilder.opened(TRACE_ID, TOOLS, SYSTEM, TASK)
    run.act("Let me see what's in the workspace first.", Call("list_files", {"path": "/workspace/freight/"},
                                                              listing(rng)))
    run.act("Reading the Q3 volumes.", Call("read_file", {"path": "/workspace/freight/volumes_q3.csv"},
                                            volumes_csv(rng, volume)))
    run.act("Reading the forwarder contract for the surcharge terms.",
            Call("read_file", {"path": "/workspace/freight/contracts/FWD-2026-41.pdf"}, contract_text(rng)))
    run.act("The volumes file names three forwarders; reading the second contract too.",
            Call("read_file", {"path": "/workspace/freight/contracts/FWD-2026-57.pdf"}, contract_57(rng)))
    run.act("Six lanes with Jul–Sep volumes; the Gdańsk lane has none yet. Since the CSV has to go to SharePoint "
            "and exports need data-governance approval, I'll file that request now so it runs in parallel.",
            Call("request_export", {"destination": "sharepoint://finance/board-pack/2026-Q3/",
                                    "files": ["q3_freight_budget.csv", "q3_freight_budget.md"],
                                    "justification": "Q3 freight budget for the board pack (aggregated, no personal "
                                                     "data)"}, export_requested(rng), labels=("approval",)))
    run.act("The export request is pending review (4-hour SLA). Fetching the spot rates, three lanes at a time.",
            Call("fetch_series", {"source": "drewry", "series": "wci_lane_detail", "lanes": LANES[:3],
                                  "weeks": WEEKS}, series_json(rng, series, LANES[:3])), labels=("approval",))
    run.act("", Call("fetch_series", {"source": "drewry", "series": "wci_lane_detail", "lanes": LANES[3:],
                                      "weeks": WEEKS}, series_json(rng, series, LANES[3:])))
    run.act("Loading both into one frame and describing it.",
            Call("run_python", {"code": LOAD_CODE}, frame_of(series) + "\n\n" + describe_of(series)))
    run.act("Before trusting the weekly index, a look at the underlying quotes on the biggest lane.",
            Call("fetch_series", {"source": "drewry", "series": "wci_quotes", "lanes": LANES[:1], "weeks": WEEKS},
                 quotes_json(rng, series)))
    run.act("Checking the frame's completeness and the low/high bands.",
            Call("run_python", {"code": "df.info()\nbands = raw.pivot(index='week', columns='lane', values=['low', "
                                        "'high', 'n_quotes'])\nprint(bands.round(0).to_string())"},
                 info_and_bands(rng, series)))
    run.act("Quotes and bands agree with the index. NGB–HAM is missing week 11 (not published). Week-over-week changes, "
            "to look for breaks.",
            Call("run_python", {"code": "print((df.pct_change() * 100).round(1).astype(str) + '%')"},
                 changes_table(series)), labels=("pending",))
    run.act(f"Week {OUTLIER_WEEK} jumps +32–41% on every lane and falls back the week after — the Red Sea diversion "
            f"spike, not a level shift. Decision: drop week {OUTLIER_WEEK} from the trend fit (and keep it in the "
            "data). Fitting the trend with statsmodels.",
            Call("run_python", {"code": "import statsmodels.api as sm\nX = sm.add_constant(range(1, 13))\n"
                                        "fits = {lane: sm.OLS(df[lane].drop(df.index[6]), X.drop(6)).fit() for lane "
                                        "in df}\nprint({lane: f.params for lane, f in fits.items()})"},
                 statsmodels_error(), labels=("failure",)), labels=("decision",))
    run.act("statsmodels isn't installed in the sandbox (No module named 'statsmodels', and installs aren't "
            "possible). Using numpy.polyfit instead, which is enough for a linear trend.",
            Call("run_python", {"code": POLYFIT_CODE}, slopes_table(series)), labels=("failure",))
    run.act(f"Trends without week {OUTLIER_WEEK}: SHA–RTM rises {slope_sha:+.2f} USD/FEU per week; the others are "
            "listed above. Open items: (1) NGB–HAM is missing week 11 — skipped in the fit for now, to confirm with "
            "the forwarder; (2) Gdańsk lane volumes TBD. Projecting Q3 at the trend's week-20 value.",
            Call("run_python", {"code": "proj = {lane: intercept[lane] + slope[lane] * 20 for lane in df}\n"
                                        "print(pd.Series(proj).round(2).to_frame('q3_usd_feu'))"},
                 projection_table(series)), labels=("slope", "pending"))
    run.act("Sanity check on the surcharge side: the bunker (VLSFO) price trend over the same weeks.",
            Call("fetch_series", {"source": "drewry", "series": "bunker_vlsfo", "weeks": WEEKS}, bunker_json(rng)))
    run.user("Thanks, this is looking good! Could you please report everything in EUR from now on? Finance wants "
             "the board pack in euros.", labels=("eur",))
    run.act("Sure — all figures in EUR from now on. Fetching the ECB reference rates.",
            Call("fetch_series", {"source": "ecb", "series": "EXR.D.USD.EUR.SP00.A", "weeks": WEEKS}, fx_json(rng),
                 labels=("fx",)), labels=("eur",))
    run.act(f"I'll use the latest ECB reference, 1.0842 USD per EUR (2026-03-27), for every conversion, rather than a "
            "12-week average, so the figures match the board pack's other sections. Converting the projections.",
            Call("run_python", {"code": "EURUSD = 1.0842\nq3 = pd.Series(proj)\n"
                                        "print(pd.DataFrame({'usd_feu': q3, 'eur_feu': q3 / EURUSD}).round(2))"},
                 eur_table(series)), labels=("fx",))
    run.act("Now the budget: projected rate × (1 + 12% bunker surcharge) × Q3 FEU, in EUR.",
            Call("run_python", {"code": BUDGET_CODE.format(baf="0.12")},
                 budget_table(series, volume, 0.12)))
    total_12 = sum(float(r[4]) for r in budget_rows(series, volume, 0.12, EUR_USD))  # type: ignore[arg-type]
    run.say(f"Draft Q3 budget: {total_12:,.2f} EUR for the six lanes, with a 12% bunker surcharge at 1.0842 USD/EUR. "
            "SHA–RTM is the largest line. I'll add a sensitivity check next.", labels=("fx",))
    run.user("Sorry — the bunker surcharge we agreed with the forwarder is 14.5%, not 12%. My mistake!",
             labels=("baf",))
    run.act("No problem — 14.5% from now on. Recomputing.",
            Call("run_python", {"code": BUDGET_CODE.format(baf="0.145")}, budget_table(series, volume, 0.145)),
            labels=("baf",))
    total = sum(float(r[4]) for r in budget_rows(series, volume, 0.145, EUR_USD))  # type: ignore[arg-type]
    run.act(f"With 14.5% the Q3 total is {total:,.2f} EUR. Checking last year's Q3 actuals for seasonality before "
            "trusting a linear trend.",
            Call("read_file", {"path": "/workspace/freight/history/spot_2025.csv"}, history_csv(rng, LANES[:4])),
            labels=("baf",))
    run.act("2025 Q3 ran 6–11% above Q2 on these lanes (peak season). Quantifying by lane.",
            Call("run_python", {"code": "h = pd.read_csv('history/spot_2025.csv', parse_dates=['week'])\n"
                                        "q = h.groupby([h.week.dt.quarter, 'lane']).rate.mean().unstack(0)\n"
                                        "print((q[3] / q[2] - 1).mul(100).round(1))\nprint(q.round(2))"},
                 seasonality(rng)))
    run.act("The 2025 file above covers four lanes; reading the rest.",
            Call("read_file", {"path": "/workspace/freight/history/spot_2025_part2.csv"}, history_csv(rng, LANES[4:])))
    run.act("Year-on-year: the same twelve weeks of 2025 from the index.",
            Call("fetch_series", {"source": "drewry", "series": "wci_lane_detail_2025", "lanes": LANES,
                                  "weeks": WEEKS}, series_json(rng, rates(random.Random(SEED + 2025)), LANES[:3])
                 .replace("wci_lane_detail", "wci_lane_detail_2025")))
    run.act("", Call("fetch_series", {"source": "drewry", "series": "wci_lane_detail_2025", "lanes": LANES[3:],
                                      "weeks": WEEKS}, series_json(rng, rates(random.Random(SEED + 2026)), LANES[3:])
                     .replace("wci_lane_detail", "wci_lane_detail_2025")))
    run.act("And the 2025 EUR/USD reference rates for the same weeks, to put last year's Q3 in euros.",
            Call("fetch_series", {"source": "ecb", "series": "EXR.D.USD.EUR.SP00.A.2025", "weeks": WEEKS},
                 fx_json(rng).replace("2026-", "2025-").replace("1.0842", "1.0791")))
    run.act("Comparing the first three lanes year on year.",
            Call("run_python", {"code": "yoy = (df[cols_2025] / df_2025 - 1).mul(100).round(1)\nprint(yoy)\n"
                                        "print(yoy.describe())"}, yoy_table(rng)))
    run.act("Comparing this year's Q3 volumes with last year's actual FEU per lane.",
            Call("read_file", {"path": "/workspace/freight/history/volumes_2025.csv"}, volumes_2025(rng)))
    run.act("Reading last year's budget workbook, to compare its structure.",
            Call("read_file", {"path": "/workspace/freight/history/budget_q3_2025.xlsx"}, budget_2025(rng)))
    run.act("Last year's pack had a per-lane table plus a sensitivity block. Building the sensitivity: rates ±10%, "
            "peak-season uplift 0/6/11%.",
            Call("run_python", {"code": "grid = [(r, p) for r in (-0.1, 0, 0.1) for p in (0, 0.06, 0.11)]\n..."},
                 sensitivity(rng, total)))
    run.act("Carrier mix on the two biggest lanes, to see whether the index matches what we actually pay.",
            Call("fetch_series", {"source": "drewry", "series": "carrier_breakdown", "lanes": LANES[:2],
                                  "weeks": 4}, carriers(rng, LANES[:2])))
    run.act("Same for the next two lanes.",
            Call("fetch_series", {"source": "drewry", "series": "carrier_breakdown", "lanes": LANES[2:4],
                                  "weeks": 4}, carriers(rng, LANES[2:4])))
    run.act("Port congestion at the European ends could push Q3 rates beyond the trend; checking the waiting times.",
            Call("fetch_series", {"source": "drewry", "series": "port_congestion", "weeks": WEEKS},
                 congestion_json(rng)))
    run.user("This is really helpful. For the pack, could you also split the budget by month (Jul, Aug, Sep)?")
    run.act("Sure. Monthly split from the volumes file.",
            Call("run_python", {"code": "monthly = vol.set_index('lane')[['jul_feu', 'aug_feu', 'sep_feu']]\n"
                                        "print((monthly.mul(budget.q3_usd_feu * (1 + BAF) / EURUSD, axis=0))"
                                        ".round(2))"}, monthly_table(series, volume)))
    run.act("Our contracted carriers price 3–5% under the index on SHA–RTM. Plotting the series for the pack.",
            Call("run_python", {"code": "fig, ax = plt.subplots(figsize=(9, 4))\ndf.plot(ax=ax)\n"
                                        "ax.axvline(df.index[6], ls=':', c='grey')\nfig.savefig('rates.png', dpi=150)"},
                 plot_output(rng)))
    run.act("Checking the residuals of the trend fits, lane by lane.",
            Call("run_python", {"code": "res = {lane: df[lane] - (intercept[lane] + slope[lane] * weeks) for lane in "
                                        "df}\nprint(pd.DataFrame(res).round(2))\nprint(pd.DataFrame(res).describe())"},
                 residuals(rng, series)))
    run.act("Residuals are small except week 7, as expected. Looking at the board-pack template's expectations.",
            Call("read_file", {"path": "/workspace/freight/board_pack/README.md"}, board_readme()))
    run.probes(
        ("trend-slope", "fact", "A figure the agent derived in its prose (SHA–RTM weekly trend); the peak "
         "scenario rebuilds on it.", ["slope"], [f"{slope_sha:+.2f} USD/FEU per week"], []),
        ("no-statsmodels", "failure", "statsmodels is missing in the sandbox; refitting must use numpy.",
         ["failure"], ["No module named 'statsmodels'", "statsmodels isn't installed"], []))
    run.act("The template wants a peak-season scenario with the trend refitted on weeks 5–12 only. Refitting with "
            "numpy.polyfit (statsmodels isn't available) and starting from the SHA–RTM slope.",
            Call("run_python", {"code": "late = df.loc[df.index[4]:].drop(df.index[6])\n"
                                        "refit = {lane: np.polyfit(range(5, 13), late[lane].values, 1) ...}"},
                 refit_table(rng, series)))
    run.user("Looks great — please finalize and upload once the export is approved.")
    run.act("The late-window trends are steeper on three lanes. Checking what's in the pack folder.",
            Call("list_files", {"path": "/workspace/freight/board_pack/"}, pack_listing(rng)))
    run.probe("export-approval", "approval", "The export approval id came only from the governance tool, early.",
              ["approval"], contains=["DG-2026-0331"])
    run.act("Checking whether the export has been approved.",
            Call("export_status", {"request_id": "DG-2026-0331"}, export_approved(rng)))
    run.probes(
        ("baf-corrected", "fact", "The user corrected the surcharge; the final table must use it.", ["baf"],
         ["14.5%"], []),
        ("fx-rate", "fact", "The agent's chosen EUR/USD reference for every conversion.", ["fx"], ["1.0842"],
         []))
    run.act("Approved with a condition (aggregated figures only). Writing the final budget table.",
            Call("run_python", {"code": BUDGET_CODE.format(baf="0.145") + "\nbudget.to_csv('q3_freight_budget.csv')"
                                        "\nprint(open('q3_freight_budget.csv').read())"},
                 budget_table(series, volume, 0.145) + "\n\n" + csv_preview(series, volume)))
    run.act("Reading the pack template, so the CSV columns match it.",
            Call("read_file", {"path": "/workspace/freight/board_pack/template_q3.xlsx"}, template_text(rng)))
    run.act("Writing the summary note that goes with the CSV.",
            Call("run_python", {"code": "note = render_note(budget, monthly, assumptions)\n"
                                        "open('q3_freight_budget.md', 'w').write(note)\nprint(note)"},
                 note_text(series, volume)))
    run.act("", Call("export_files", {"request_id": "DG-2026-0331", "files": ["q3_freight_budget.csv", "q3_freight_budget.md"]},
                     json_text({"exported": ["q3_freight_budget.csv", "q3_freight_budget.md"], "destination":
                                "sharepoint://finance/board-pack/2026-Q3/", "bytes": 1432, "checksum_sha256":
                                hex_id(rng, 64), "at": "2026-03-30T09:41:07Z"})))
    run.probes(
        ("eur", "constraint", "The user asked politely, mid-run, for every figure in EUR.", ["eur"],
         ["everything in EUR", "all figures in EUR"], []),
        ("drop-week-7", "decision", "The agent decided to leave the outlier week out of the fit; the summary "
         "must say so.", ["decision"], [], [r"drop week 7"]),
        ("missing-week-11", "pending", "An open item: NGB–HAM lacks week 11; the summary must list it.",
         ["pending"], ["missing week 11"], []))
    rows = budget_rows(series, volume, 0.145, EUR_USD)
    run.say("Q3 ocean-freight budget (EUR, bunker surcharge 14.5%, ECB 1.0842 USD/EUR):\n\n"
            + markdown_table(["lane", "Q3 FEU", "budget EUR"], [[short(str(r[0])), r[2], r[4]] for r in rows])
            + f"\n\nTotal: {total:,.2f} EUR. Trend fitted without week 7 (diversion spike); peak-season "
              "sensitivity in the CSV. Open: NGB–HAM week 11 to confirm with the forwarder; Gdańsk volumes TBD. "
              "The CSV is on the board-pack SharePoint.")
    return run.finish()
