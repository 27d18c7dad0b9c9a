"""Scenario 1, the seed's running example: comparing 20 supplier quotes (Chinese and English) for one RFQ.

Units (piece, dozen, carton), currencies (USD, CNY, EUR), incoterms, MOQ, a freight figure that arrives late, a
tariff service that rejects dotted HS codes, an approval id only the ERP holds; mid-run the user corrects
supplier C's pack size, asks in Chinese for the final brief in Chinese with two decimals, and gives a 6% annual
cost of capital.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from .builder import Call, RunBuilder, Scenario, tool
from .noise import describe_text, frame_text, hex_id, http_text, iso, json_text, markdown_table, moments, pick_float

SEED = 20260412
TRACE_ID = "scenario-procurement-20-quotes"
USD_CNY = 7.1235  # central parity of 2026-06-30, the agent's decision
EUR_USD = 1.0712  # ECB reference of 2026-06-30
PROBED = ("7.1235", "1.0712", "0.48", "14.40")  # values random noise must not print

TOOLS = [
    tool("list_files", "List files in a shared folder.", {"path": "folder path"}),
    tool("read_quote", "Extract the text of a supplier's quote document (PDF, image or email attachment).",
         {"rfq": "RFQ number", "supplier": "supplier code, A-T"}),
    tool("query_sheet", "Read a range of an Excel workbook as a table.",
         {"workbook": "path", "sheet": "sheet name", "range": "A1 range"}),
    tool("fx_rates", "Daily FX fixings (PBOC central parity, ECB reference) for a pair and date range.",
         {"pair": "e.g. USD/CNY", "start": "YYYY-MM-DD", "end": "YYYY-MM-DD"}),
    tool("search_mail", "Search the procurement mailbox; returns matching messages with bodies.",
         {"query": "search words", "folder": "mail folder"}, optional=("folder",)),
    tool("send_email", "Send an email from the procurement mailbox.",
         {"to": "address", "subject": "subject", "body": "plain text body"}),
    tool("hs_tariff", "Look up import duty and VAT for an HS code and country of origin (China customs tariff).",
         {"hs_code": "HS code", "origin": "ISO country code"}),
    tool("erp_purchase_request", "Read a purchase request from the ERP, with its approval workflow.",
         {"pr_id": "purchase request id"}),
    tool("approval_status", "Read the status and history of an ERP approval.", {"approval_id": "approval id"}),
    tool("run_python", "Run Python (pandas available) in the analysis sandbox; returns stdout.",
         {"code": "Python source"}),
    tool("update_sheet", "Write rows to an Excel sheet (replacing the sheet's data rows).",
         {"workbook": "path", "sheet": "sheet name", "rows": {"type": "array", "items": {"type": "array"}}}),
    tool("write_file", "Write a text file to the shared folder.", {"path": "file path", "content": "text"}),
]

SYSTEM = """You are ProcureBot, the sourcing analyst agent of Hangzhou Hechuan Home Goods Co. (杭州禾川家居).
You work on RFQs with the tools provided: read quotes, normalise them, and prepare comparisons for the buyers.
Work carefully with units, currencies and incoterms; say where each figure comes from; keep the buyer informed
of what is done and what is still open. Use the tools rather than guessing. The buyer may write in Chinese or in
English; answer in the language they use unless told otherwise."""

TASK = """你好，帮我把 RFQ-2026-118 的 20 家供应商报价做一个比较：TX-4410 500ml 不锈钢真空保温杯，需求 12,000 只，送到上海松江仓。
The quotes are in /shared/procurement/RFQ-2026-118/ — mixed Chinese and English, different currencies, incoterms and
price units. 要统一成到仓单价（含运费、关税），也要看 MOQ 和付款条件。对应的请购单是 PR-2026-0877。
数据不完整之前先不要给最终推荐。"""


@dataclass(frozen=True)
class Supplier:
    code: str
    name: str
    city: str
    country: str
    language: str  # "zh" or "en"
    currency: str
    incoterm: str
    price: float
    basis: str  # "pc", "dozen", "carton"
    pack: int | None  # pieces per carton; None when the quote does not say
    moq: int
    payment: str
    payment_days: int
    lead_days: int
    freight: str  # what the quote says about freight


SUPPLIERS = [
    Supplier("A", "Ningbo Hengda Housewares Co., Ltd.", "Ningbo", "CN", "en", "USD", "FOB Ningbo", 2.86, "pc", 24,
             10000, "T/T 30 days after B/L", 30, 35, "not included (FOB)"),
    Supplier("B", "Suzhou Brightway Drinkware Co., Ltd.", "Suzhou", "CN", "en", "USD", "DDP Shanghai Songjiang", 2.71,
             "pc", 24, 12000, "net 60 days after delivery", 60, 40, "included (DDP)"),
    Supplier("C", "永康市晨光杯业有限公司", "永康", "CN", "zh", "CNY", "EXW 永康", 16.90, "pc", 24, 8000, "月结30天", 30,
             30, "未报"),
    Supplier("D", "Guangzhou Dayu Trading Ltd.", "Guangzhou", "CN", "en", "USD", "CIF Shanghai", 34.20, "dozen", 48,
             6000, "T/T 30 days", 30, 45, "to Shanghai port included (CIF); delivery to warehouse by buyer"),
    Supplier("E", "浙江义乌鑫源日用品厂", "义乌", "CN", "zh", "CNY", "出厂价含13%增值税", 21.50, "pc", 20, 5000,
             "预付30%，余款发货前付清", 0, 25, "另计，按实际"),
    Supplier("F", "Vidraria Atlântica Lda.", "Porto", "PT", "en", "EUR", "FCA Porto", 2.41, "pc", None, 10000,
             "45 days net", 45, 50, "buyer's forwarder"),
    Supplier("G", "上海沪杯实业有限公司", "上海", "CN", "zh", "CNY", "送货到上海仓", 19.60, "pc", 36, 10000, "月结60天",
             60, 28, "含"),
    Supplier("H", "Shenzhen Hopewell Vacuumware Co.", "Shenzhen", "CN", "en", "USD", "FOB Shenzhen", 2.39, "pc", 24,
             20000, "T/T 30 days", 30, 40, "not included (FOB)"),
    Supplier("I", "宁波佳禾杯具有限公司", "宁波", "CN", "zh", "USD", "FOB 宁波", 2.95, "pc", 24, 3000, "100% 预付",
             0, 20, "FOB，不含"),
    Supplier("J", "Saigon Steelware JSC", "Ho Chi Minh City", "VN", "en", "USD", "FOB Cat Lai", 2.52, "pc", 25, 10000,
             "L/C at sight", 0, 50, "not included (FOB)"),
    Supplier("K", "Kühn Haushaltswaren GmbH", "Hamburg", "DE", "en", "EUR", "FCA Hamburg", 2.49, "pc", 24, 12000,
             "30 days net", 30, 55, "buyer's forwarder"),
    Supplier("L", "杭州临平恒温杯业", "杭州", "CN", "zh", "CNY", "含运费送到松江", 19.60, "pc", 30, 6000, "月结45天", 45,
             30, "含"),
    Supplier("M", "Xiamen Meridian Houseware Co.", "Xiamen", "CN", "en", "USD", "FOB Shanghai", 68.40, "carton", 24,
             8000, "T/T 45 days", 45, 42, "not included (FOB)"),
    Supplier("N", "金华市诺威真空器皿厂", "金华", "CN", "zh", "CNY", "EXW 金华", 18.90, "pc", 24, 10000, "月结30天", 30,
             35, "运费 ¥0.35/只 另计"),
    Supplier("O", "Orion Metalcraft Pvt. Ltd.", "Mumbai", "IN", "en", "USD", "CIF Shanghai", 2.66, "pc", 24, 10000,
             "D/P at sight", 0, 60, "to Shanghai port included (CIF)"),
    Supplier("P", "苏州璞悦家居用品有限公司", "苏州", "CN", "zh", "CNY", "DDP 松江", 19.90, "pc", 24, 12000, "月结45天", 45,
             32, "含"),
    Supplier("Q", "Siam Thermoware Co., Ltd.", "Bangkok", "TH", "en", "USD", "FOB Laem Chabang", 2.58, "pc", 24, 8000,
             "T/T 30 days", 30, 48, "not included (FOB)"),
    Supplier("R", "上海锐达国际贸易有限公司", "上海", "CN", "zh", "USD", "FOB 上海", 2.74, "pc", 24, 10000, "T/T 30天",
             30, 30, "FOB，不含"),
    Supplier("S", "Selangor Drinkware Sdn. Bhd.", "Shah Alam", "MY", "en", "USD", "CIF Shanghai", 2.93, "pc", 24, 5000,
             "T/T 45 days", 45, 45, "to Shanghai port included (CIF)"),
    Supplier("T", "台州天宇杯业有限公司", "台州", "CN", "zh", "CNY", "FOB 上海", 226.80, "dozen", 24, 10000, "T/T 30天",
             30, 33, "FOB，不含"),
]


def unit_usd(supplier: Supplier, pack_of_c: int = 30) -> float:
    """Price per piece in USD at the agreed fixings (E's price includes 13% VAT, which is taken out)."""
    per_piece = supplier.price
    if supplier.basis == "dozen":
        per_piece /= 12
    elif supplier.basis == "carton":
        per_piece /= supplier.pack or 1
    if supplier.code == "E":
        per_piece /= 1.13
    if supplier.currency == "CNY":
        return per_piece / USD_CNY
    if supplier.currency == "EUR":
        return per_piece * EUR_USD
    return per_piece


def quote_text(rng: random.Random, supplier: Supplier) -> str:
    """The extracted text of a quote: letterhead, price tiers, specification, packing, terms and boilerplate."""
    number = f"Q{rng.randint(2606, 2607)}-{rng.randint(100, 999)}"
    prefix = {"CN": "86 5" + str(rng.randint(10, 79)), "VN": "84 28", "DE": "49 40", "PT": "351 22", "TH": "66 2",
              "MY": "60 3", "IN": "91 22"}[supplier.country]
    phone = f"+{prefix} {rng.randint(1000, 9999)} {rng.randint(1000, 9999)}"
    tiers = [(q, round(supplier.price * f, 2)) for q, f in ((supplier.moq, 1.0), (supplier.moq * 2, 0.975),
                                                             (supplier.moq * 4, 0.955))]
    colors = rng.sample(["matte black", "pearl white", "sage green", "navy", "stainless", "blush pink", "sand",
                         "graphite", "ocean blue", "lilac"], 6)
    weight = rng.randint(285, 340)
    if supplier.language == "zh":
        unit = {"pc": "只", "dozen": "打", "carton": "箱"}[supplier.basis]
        packing = f"{supplier.pack}只/箱，外箱五层瓦楞纸，单只彩盒" if supplier.pack else "包装方式待定"
        lines = [
            f"{supplier.name}", f"地址：{supplier.city}市经济开发区工业路{rng.randint(8, 388)}号  电话：{phone}",
            f"报价单号：{number}    日期：2026-06-{rng.randint(18, 27):02d}    有效期：30天",
            "致：杭州禾川家居 采购部    询价单：RFQ-2026-118", "",
            "产品：TX-4410 500ml 不锈钢真空保温杯（内胆SUS304，外壳SUS201）", "",
            "| 数量 | 单价 | 币种 | 价格条款 |", "|---|---|---|---|",
            *[f"| ≥{q:,} | {p:.2f}/{unit} | {supplier.currency} | {supplier.incoterm} |" for q, p in tiers], "",
            "规格：", f"- 容量 500ml，净重约 {weight}g，保温 12 小时 ≥ 68°C（95°C 灌装，室温 20°C）",
            "- 内胆 SUS304 电解抛光，外壳喷粉，杯盖 PP+硅胶圈，可拆卸滤网",
            f"- 颜色：{'、'.join(colors)}（Pantone 色需另加打样费 ¥{rng.randint(300, 800)}）",
            f"- LOGO：丝印单色 ¥{rng.uniform(0.15, 0.35):.2f}/只，激光雕刻 ¥{rng.uniform(0.3, 0.6):.2f}/只",
            f"- 检测：LFGB、FDA 食品级报告可提供（{rng.choice(['SGS', 'Intertek', 'BV'])}）", "",
            f"包装：{packing}", f"最小起订量（MOQ）：{supplier.moq:,} 只", f"付款方式：{supplier.payment}",
            f"交期：收到订金/PO 后 {supplier.lead_days} 天", f"运费：{supplier.freight}", "",
            "备注：", "1. 以上价格不含模具费；如需改色或改杯盖结构，另行报价。",
            f"2. 原材料（304 不锈钢）价格波动超过 {rng.randint(3, 8)}% 时，我司保留调价权利。",
            "3. 样品 3 只免费，快递费到付。", "4. 大货生产前需双方确认产前样。", "",
            f"开户行：中国银行{supplier.city}分行  账号：{rng.randint(10**11, 10**12 - 1)}",
            "本报价单内容仅供贵司内部使用，未经我司书面同意不得向第三方披露。如有疑问请联系业务部。",
        ]
    else:
        unit = {"pc": "piece", "dozen": "dozen", "carton": f"carton of {supplier.pack}"}[supplier.basis]
        packing = (f"{supplier.pack} pcs/ctn, 5-ply export carton, individual colour box" if supplier.pack
                   else "to be advised after artwork approval")
        lines = [
            f"{supplier.name}", f"{supplier.city}, {supplier.country} · Tel {phone} · sales@{supplier.code.lower()}"
            f"{hex_id(rng, 4)}.example", f"QUOTATION {number}   Date: 2026-06-{rng.randint(18, 27):02d}   Valid: "
            + ("until 2026-07-15" if supplier.code == "K" else "30 days"),
            "To: Hangzhou Hechuan Home Goods Co., Purchasing Dept.   Ref: RFQ-2026-118", "",
            "Item: TX-4410 vacuum insulated bottle 500 ml, inner SUS304, outer SUS201, powder coated", "",
            "| Qty | Unit price | Currency | Terms |", "|---|---|---|---|",
            *[f"| {q:,}+ | {p:.2f} / {unit} | {supplier.currency} | {supplier.incoterm} |" for q, p in tiers], "",
            "Specification:", f"- Capacity 500 ml, net weight approx. {weight} g; heat retention >= 68 C after 12 h",
            "- Electropolished SUS304 liner, PP lid with silicone seal, removable infuser",
            f"- Colours: {', '.join(colors)}; custom Pantone +USD {rng.randint(60, 150)} per colour",
            f"- Logo: 1-colour silk print USD {rng.uniform(0.03, 0.06):.3f}/pc; laser USD {rng.uniform(0.05, 0.09):.3f}/pc",
            f"- Food-contact reports: LFGB, FDA ({rng.choice(['SGS', 'Intertek', 'TUV', 'BV'])}, 2026)", "",
            f"Packing: {packing}", f"MOQ: {supplier.moq:,} pcs", f"Payment: {supplier.payment}",
            f"Lead time: {supplier.lead_days} days after PO and artwork approval", f"Freight: {supplier.freight}", "",
            "Remarks:", "1. Prices exclude tooling; lid or colour changes are quoted separately.",
            f"2. Prices may be revised if the SUS304 coil price moves by more than {rng.randint(3, 8)}%.",
            "3. Three samples free of charge, courier collect.",
            "4. Pre-production sample to be approved before mass production.", "",
            f"Bank: {rng.choice(['HSBC', 'Deutsche Bank', 'Vietcombank', 'Maybank', 'Bank of China', 'Kasikornbank'])}"
            f" · SWIFT {''.join(rng.choice('ABCDEFGHJKLMNPQRSTUVWXYZ') for _ in range(8))}",
            "This quotation is confidential and intended for the addressee only. E&OE. All business is subject to our"
            " general terms of sale, available on request. Prices are based on the quantities stated and on the"
            " specification above; any change may lead to a revised offer.",
        ]
    lines += cost_breakdown(rng, supplier)
    document = {"rfq": "RFQ-2026-118", "supplier": supplier.code, "file":
                f"/shared/procurement/RFQ-2026-118/quotes/{supplier.code}_{supplier.name.split()[0].strip(',')}.pdf",
                "pages": rng.randint(1, 3), "ocr_confidence": round(rng.uniform(0.86, 0.99), 2),
                "language": supplier.language, "text": "\n".join(lines)}
    return json_text(document)


def cost_breakdown(rng: random.Random, supplier: Supplier) -> list[str]:
    """Page 2 of a quote: the cost structure some suppliers attach, and the page furniture OCR picks up."""
    parts = ["SUS304 liner", "SUS201 shell", "vacuum & welding", "powder coating", "lid PP + silicone", "colour box",
             "export carton", "labour", "QC & testing", "overhead", "margin"]
    shares = [rng.uniform(2, 30) for _ in parts]
    total = sum(shares)
    zh = supplier.language == "zh"
    head = ["", "— 第 1 页 / 共 2 页 —" if zh else "— Page 1 of 2 —", "",
            "成本构成（参考）：" if zh else "Cost structure (indicative):",
            "| 项目 | 占比 |" if zh else "| item | share |", "|---|---|"]
    rows = [f"| {part} | {share / total:.1%} |" for part, share in zip(parts, shares)]
    terms = ("一般条款：1. 本报价以双方签订的采购合同为准；2. 质量异议须在收货后 15 日内书面提出；3. 因不可抗力造成的延误，"
             "双方互不承担责任；4. 争议提交卖方所在地仲裁委员会仲裁。" if zh else
             "General terms: 1. This offer is subject to a signed purchase contract. 2. Quality claims must be made in "
             "writing within 15 days of receipt. 3. Neither party is liable for delays caused by force majeure. "
             "4. Disputes are settled by arbitration at the seller's seat. 5. Title passes on full payment.")
    return head + rows + ["", terms, "", "— 第 2 页 / 共 2 页 —" if zh else "— Page 2 of 2 —"]


def supplier(code: str) -> Supplier:
    return next(s for s in SUPPLIERS if s.code == code)


def read_quotes(rng: random.Random, *codes: str) -> list[Call]:
    return [Call("read_quote", {"rfq": "RFQ-2026-118", "supplier": code}, quote_text(rng, supplier(code)))
            for code in codes]


def listing(rng: random.Random) -> str:
    files = [{"name": "comparison.xlsx", "size": 48213, "modified": "2026-06-24T09:12:44Z"},
             {"name": "RFQ-2026-118.pdf", "size": 182331, "modified": "2026-06-10T02:40:03Z"}]
    for s in SUPPLIERS:
        stamp = datetime(2026, 6, 18, 8) + timedelta(hours=rng.randint(0, 230), minutes=rng.randint(0, 59))
        files.append({"name": f"quotes/{s.code}_{s.name.split()[0].strip(',')}.pdf",
                      "size": rng.randint(60_000, 900_000), "modified": iso(stamp, millis=False),
                      "sha256": hex_id(rng, 16)})
    files.append({"name": "mail_export/", "entries": 143, "modified": "2026-06-30T11:02:18Z"})
    return json_text({"path": "/shared/procurement/RFQ-2026-118/", "count": len(files), "files": files})


def template_sheet(rng: random.Random) -> str:
    headers = ["Supplier", "Currency", "Incoterm", "Price", "Unit", "Pcs/ctn", "MOQ", "Payment", "Lead", "FX",
               "USD/pc", "Freight/pc", "Duty", "Landed/pc", "Notes"]
    rows = [[s.code] + [""] * (len(headers) - 1) for s in SUPPLIERS]
    notes = ["# template v3 (2025-11), owner: 采购部 李娜", "# fill Landed/pc = USD/pc + Freight/pc + Duty",
             "# do not edit the formulas in columns K-N", f"# last opened by: lina.li {rng.randint(10, 28)}.06.2026",
             "# Units: Price as quoted; Unit = pc | dozen | carton; FX = rate used (CNY per USD or USD per EUR)",
             "# Freight/pc: to SJ-WH-02 incl. THC, customs clearance and trucking; Duty: import duty rate (0 if CN)",
             "# Sheets: Template | Normalised v1 (2026-06-24, superseded) | Normalised v2 | Notes | Sign-off",
             "# Sign-off: buyer -> category manager -> procurement director (PR > 200k CNY)"]
    return "\n".join(notes) + "\n" + frame_text(headers, rows)


def fx_series(rng: random.Random, pair: str, start: date, days: int, final: float, low: float, high: float) -> str:
    """A month of fixings; the last day carries `final`, no other day prints a probed value."""
    rows = []
    for offset in range(days):
        day = start + timedelta(days=offset)
        if day.weekday() >= 5:
            continue
        mid = final if offset == days - 1 else pick_float(rng, low, high, 4, avoid=PROBED)
        rows.append({"date": day.isoformat(), "fixing": mid,
                     "open": pick_float(rng, low, high, 4, avoid=PROBED),
                     "high": pick_float(rng, mid, high + 0.004, 4, avoid=PROBED),
                     "low": pick_float(rng, low - 0.004, mid, 4, avoid=PROBED),
                     "close": pick_float(rng, low, high, 4, avoid=PROBED)})
    source = "PBOC central parity (中间价)" if pair == "USD/CNY" else "ECB euro foreign exchange reference rate"
    return json_text({"pair": pair, "source": source, "count": len(rows), "series": rows,
                      "request_id": hex_id(rng, 20)}, indent=1)


def tariff_error(rng: random.Random) -> str:
    body = json_text({"error": {"code": "invalid_hs_code", "status": 422,
                                "message": "hs_code must be 10 digits without dots, e.g. 7323930000",
                                "field": "hs_code", "received": "7323.93.00",
                                "docs": "https://tariff.internal.example/docs#hs-code-format",
                                "details": [{"loc": ["query", "hs_code"], "msg": "string does not match regex "
                                             "'^[0-9]{10}$'", "type": "value_error.str.regex"},
                                            {"loc": ["query", "origin"], "msg": "ok", "type": "none"}]},
                      "request": {"method": "GET", "path": "/v2/tariff/lookup", "query": "hs_code=7323.93.00&origin=VN",
                                  "client": "procurebot/1.8", "received_at": "2026-06-30T03:18:51.204Z"},
                      "trace_id": hex_id(rng, 32)})
    return http_text(422, "Unprocessable Entity", {
        "Date": "Tue, 30 Jun 2026 03:18:51 GMT", "Content-Type": "application/json; charset=utf-8",
        "Content-Length": str(len(body)), "X-Request-Id": hex_id(rng, 16), "X-Ratelimit-Remaining": "58",
        "Server": "envoy", "X-Envoy-Upstream-Service-Time": str(rng.randint(8, 40)),
        "Strict-Transport-Security": "max-age=31536000; includeSubDomains"}, body) + \
        "\n\n(stack) tariff-gw 2.4.1 at validate_hs (hs.py:88) <- handle_lookup (api.py:141) <- dispatch (app.py:57)"


def tariff_result(rng: random.Random, origin: str) -> str:
    agreements = {"VN": ("ACFTA", 0.0), "TH": ("ACFTA", 0.0), "MY": ("ACFTA", 0.0), "DE": (None, None),
                  "PT": (None, None), "IN": ("APTA", 7.0)}
    agreement, preferential = agreements.get(origin, (None, None))
    notes = [f"Rate {year}: MFN {rate}%" for year, rate in ((2023, 12.0), (2024, 10.0), (2025, 10.0))]
    result = {"hs_code": "7323930000", "description_zh": "不锈钢制餐桌、厨房或其他家用器具及其零件",
              "description_en": "Table, kitchen or other household articles of stainless steel",
              "origin": origin, "mfn_rate_pct": 10.0, "general_rate_pct": 80.0,
              "preferential": ({"agreement": agreement, "rate_pct": preferential,
                                "certificate": "Form E" if agreement == "ACFTA" else "APTA certificate"}
                               if agreement else None),
              "vat_pct": 13.0, "consumption_tax_pct": 0.0, "inspection": "法检 (CIQ) required: food contact",
              "regulatory_conditions": ["A", "B"], "history": notes, "valid_from": "2026-01-01",
              "source": "customs tariff 2026 edition", "request_id": hex_id(rng, 20),
              "related_codes": [{"hs_code": f"732393{rng.randint(1000, 9999)}", "description": "other, stainless"}
                                for _ in range(4)]}
    return json_text(result)


def mail_results(rng: random.Random, messages: list[dict[str, str]]) -> str:
    hits = []
    for message in messages:
        stamp = datetime(2026, 6, 20) + timedelta(hours=rng.randint(0, 260), minutes=rng.randint(0, 59))
        hits.append({"id": f"<{hex_id(rng, 12)}@mail.hechuan.example>", "date": iso(stamp, millis=False),
                     **message, "attachments": rng.randint(0, 2)})
    return json_text({"total": len(hits) + rng.randint(2, 9), "returned": len(hits), "messages": hits})


def erp_request(rng: random.Random) -> str:
    lines = [{"line": n + 1, "sku": sku, "description": text, "qty": qty, "uom": "PCS",
              "budget_unit_price_cny": price, "cost_center": "CC-2210-HZ"}
             for n, (sku, text, qty, price) in enumerate([
                 ("TX-4410", "500ml vacuum bottle, SUS304", 12000, 21.00),
                 ("TX-4410-BOX", "colour box 500ml", 12000, 0.85),
                 ("TX-4410-SMP", "pre-production samples", 30, 0.0)])]
    history = [{"at": iso(t, millis=False), "by": by, "action": action}
               for t, (by, action) in zip(moments(rng, datetime(2026, 6, 22, 1), 5, 3600, 40000), [
                   ("lina.li", "created"), ("lina.li", "submitted"), ("zhou.min (部门经理)", "approved step 1"),
                   ("system", "budget check passed: CC-2210-HZ remaining CNY 1,284,300.00"),
                   ("system", "routed to step 2: procurement_director")])]
    record = {"pr_id": "PR-2026-0877", "status": "in_approval", "requester": "lina.li", "department": "采购部",
              "created": "2026-06-22T09:31:07+08:00", "currency": "CNY", "total_budget_cny": 262200.00,
              "lines": lines, "vendor_suggested": None, "rfq": "RFQ-2026-118",
              "approval": {"approval_id": "APR-2026-0412", "workflow": "PR > 200k CNY", "status": "pending",
                           "current_step": 2, "steps": [
                               {"step": 1, "role": "department_manager", "assignee": "zhou.min", "state": "approved",
                                "decided_at": "2026-06-24T16:02:51+08:00"},
                               {"step": 2, "role": "procurement_director", "assignee": "wang.lei (采购总监 王蕾)",
                                "state": "pending", "since": "2026-06-26T10:15:00+08:00"}],
                           "sla_hours": 72, "escalation": "auto-remind every 24h"},
              "history": history, "attachments": ["RFQ-2026-118.pdf", "budget_note_v2.docx"],
              "custom_fields": {"project": "2026 Q3 promo bottles", "incoterm_preference": "DDP",
                                "delivery_site": "上海松江仓 (SJ-WH-02)", "need_by": "2026-09-05"},
              "etag": hex_id(rng, 24)}
    return json_text(record)


def normalised_rows(pack_of_c: int) -> list[list[object]]:
    freight = {"A": 0.11, "B": 0.0, "C": round(14.40 / pack_of_c, 2), "D": 0.06, "E": 0.09, "F": 0.31, "G": 0.0,
               "H": 0.12, "I": 0.11, "J": 0.19, "K": 0.33, "L": 0.0, "M": 0.08, "N": round(0.35 / USD_CNY, 2),
               "O": 0.07, "P": 0.0, "Q": 0.21, "R": 0.08, "S": 0.07, "T": 0.08}
    duty = {"F": 0.10, "K": 0.10, "O": 0.07}
    rows = []
    for s in SUPPLIERS:
        usd = unit_usd(s, pack_of_c)
        landed = usd * (1 + duty.get(s.code, 0.0)) + freight[s.code]
        rows.append([s.code, s.currency, s.incoterm.split()[0], usd, freight[s.code], duty.get(s.code, 0.0),
                     landed, s.moq, s.payment_days, "excluded: MOQ" if s.moq > 12000 else ""])
    return rows


def payment_table(rows: list[list[object]], rate: float) -> str:
    out = []
    for row in rows:
        landed, days = float(row[6]), int(row[8])  # type: ignore[arg-type]
        credit = landed * rate * days / 365
        out.append([row[0], landed, days, credit, landed - credit])
    out.sort(key=lambda r: r[4])
    return frame_text(["supplier", "landed_usd", "pay_days", "credit_value", "effective_usd"], out, decimals=4)


def forwarder_mail(rng: random.Random) -> dict[str, str]:
    lanes = [("Ningbo", "A, I", "truck"), ("Shenzhen", "H", "sea+truck"), ("Xiamen / Shanghai port", "M, R, T", "truck"),
             ("Cat Lai (VN)", "J", "sea LCL"), ("Laem Chabang (TH)", "Q", "sea LCL"), ("Porto (PT)", "F", "sea LCL"),
             ("Hamburg (DE)", "K", "sea LCL"), ("Shanghai port (CIF)", "D, O, S", "truck"), ("Yiwu", "E", "truck")]
    rows = [[origin, who, mode, f"{rng.randint(900, 3900)}", f"{rng.randint(60, 180)}", f"{rng.randint(350, 950)}",
             f"{rng.uniform(0.05, 0.34):.3f}"] for origin, who, mode in lanes]
    body = ("Dear Hechuan team,\n\nplease find our Q3 2026 rates to your Songjiang warehouse (SJ-WH-02) below. "
            "LCL rates are per W/M, minimum 1 cbm; truck rates per 9.6 m truck. All-in per piece assumes the "
            "carton sizes in your RFQ and 12,000 pcs.\n\n"
            + markdown_table(["origin", "suppliers", "mode", "ocean/truck CNY", "THC USD", "customs & docs CNY",
                              "all-in USD/pc"], rows)
            + "\n\nSurcharges: BAF as per carrier, PSS 15 Jul – 31 Aug on Europe lanes USD 150/cbm, "
              "CIQ inspection CNY 300 per declaration if selected. Insurance 0.08% of CIF value, optional. "
              "Validity: 01 Jul – 30 Sep 2026. Transit: VN 6–8 d, TH 9–11 d, EU 32–38 d.\n\n"
              "Best regards,\nKevin Xu | Jiaxin Logistics (Shanghai) Co. | +86 21 5" + str(rng.randint(1000000, 9999999)))
    return {"from": "kevin.xu@jiaxin-logistics.example", "subject": "Q3 2026 rates to Songjiang (RFQ-2026-118)",
            "body": body}


def normalise_code() -> str:
    return """import pandas as pd
FX_USD_CNY = 7.1235   # PBOC central parity 2026-06-30
FX_EUR_USD = 1.0712   # ECB reference 2026-06-30
quotes = pd.read_json('quotes_extracted.json')
pack = quotes.set_index('supplier')['pcs_per_ctn'].to_dict()
pack['C'] = 30                                      # rev. 6/28
per_piece = quotes.price / quotes.basis.map({'pc': 1, 'dozen': 12}).fillna(quotes.supplier.map(pack))
per_piece = per_piece.where(quotes.supplier != 'E', per_piece / 1.13)   # E includes 13% VAT
usd = per_piece.where(quotes.currency == 'USD', 0)
usd += (per_piece / FX_USD_CNY).where(quotes.currency == 'CNY', 0)
usd += (per_piece * FX_EUR_USD).where(quotes.currency == 'EUR', 0)
freight = pd.read_csv('freight_per_piece.csv').set_index('supplier').usd_pc
duty = pd.Series({'F': 0.10, 'K': 0.10, 'O': 0.07})
t = quotes.assign(usd_pc=usd.values).set_index('supplier')
t['freight_usd'] = freight
t['duty_rate'] = duty.reindex(t.index).fillna(0)
t['landed_usd'] = t.usd_pc * (1 + t.duty_rate) + t.freight_usd
t['note'] = ['excluded: MOQ' if m > 12000 else '' for m in t.moq]
t.to_csv('normalised_v2.csv')
print(t[['currency', 'incoterm', 'usd_pc', 'freight_usd', 'duty_rate', 'landed_usd', 'moq', 'pay_days', 'note']])"""


def normalise_output(rng: random.Random) -> str:
    headers = ["currency", "incoterm", "usd_pc", "freight_usd", "duty_rate", "landed_usd", "moq", "pay_days", "note"]
    rows = [row[1:] for row in normalised_rows(30)]
    warnings = (f"/opt/sandbox/lib/python3.11/site-packages/pandas/core/indexing.py:{rng.randint(1700, 1900)}: "
                "SettingWithCopyWarning:\nA value is trying to be set on a copy of a slice from a DataFrame.\n"
                "Try using .loc[row_indexer,col_indexer] = value instead\n\n"
                "See the caveats in the documentation: https://pandas.pydata.org/pandas-docs/stable/user_guide/"
                "indexing.html#returning-a-view-versus-a-copy\n  self._setitem_single_column(loc, value, pi)\n")
    return warnings + frame_text(headers, rows, index=[s.code for s in SUPPLIERS], decimals=4) + \
        f"\n\n[20 rows x 9 columns]\nwall time: {rng.uniform(0.4, 1.9):.2f}s"


def sheet_ack(rng: random.Random) -> str:
    checks = [{"row": n + 2, "supplier": s.code, "formula_K": "ok", "formula_N": rng.choice(["ok", "ok", "ok", "recalc"]),
               "validation": "ok" if s.pack else "warning: Pcs/ctn empty"} for n, s in enumerate(SUPPLIERS)]
    return json_text({"workbook": "/shared/procurement/RFQ-2026-118/comparison.xlsx", "sheet": "Normalised v2",
                      "range": "A2:J21", "rows_written": 20, "recalculated_cells": 80, "checks": checks,
                      "revision": rng.randint(40, 90), "saved_at": "2026-06-30T07:02:44Z"}, indent=1)


def scorecard(rng: random.Random) -> str:
    names = [s.name for s in SUPPLIERS] + ["Foshan Kingtop Kitchenware", "东莞美嘉塑胶制品", "Qingdao Harbour Steel Co.",
                                           "宁海县达丰电器", "Jiangmen Everbright Metal", "慈溪市恒星日用品",
                                           "Taizhou Greenleaf Housewares", "绍兴柯桥纺织配套", "Chaozhou Goldsun Ceramics",
                                           "温州瓯海五金"]
    rows = [[f"V{rng.randint(10000, 99999)}", name[:28], rng.randint(1, 40), pick_float(rng, 78, 100, 1),
             rng.randint(80, 2600), rng.choice(["A", "B", "B", "C", "n/a"]), f"2026-0{rng.randint(1, 6)}-"
             f"{rng.randint(10, 28)}", pick_float(rng, 2.1, 4.9, 2)] for name in names]
    return "# Supplier scorecard 2026 H1 (procurement QA) — generated 2026-06-29 23:00\n" + frame_text(
        ["vendor_id", "name", "orders", "on_time_pct", "defect_ppm", "audit", "last_order", "score"], rows)


def lab_report(rng: random.Random, lab: str, prefix: str) -> str:
    tests = [("Lead (Pb) migration", "mg/kg", 0.01), ("Cadmium (Cd) migration", "mg/kg", 0.005),
             ("Chromium (Cr) migration", "mg/kg", 0.25), ("Nickel (Ni) migration", "mg/kg", 0.14),
             ("Manganese (Mn) migration", "mg/kg", 1.8), ("Arsenic (As) migration", "mg/kg", 0.002),
             ("Overall migration, 3% acetic acid", "mg/dm2", 10.0), ("Overall migration, 95% ethanol", "mg/dm2", 10.0),
             ("Sensory (odour/taste), EN 1230", "grade", 2.0), ("Heat retention 12 h, 95 C fill", "C", 68.0)]
    lines = [f"Test report {prefix}-{rng.randint(10000, 99999)}  Lab: {lab}  Sample: TX-4410 500 ml, 3 pcs",
             f"Received {2026}-06-{rng.randint(10, 20)}; tested {2026}-06-{rng.randint(21, 27)}; standard: "
             "GB 4806.9-2016, (EU) No 10/2011, LFGB §30/31", "",
             "| test | unit | limit | result | verdict |", "|---|---|---|---|---|"]
    for name, unit, limit in tests:
        value = limit * rng.uniform(0.05, 0.6) if name != "Heat retention 12 h, 95 C fill" else rng.uniform(69, 74)
        lines.append(f"| {name} | {unit} | {'>=' if unit == 'C' else '<='} {limit} | {value:.3f} | PASS |")
    lines += ["", "Conclusion: the submitted samples comply with the requirements tested.",
              "This report relates only to the samples tested; it may not be reproduced except in full without the "
              "written approval of the laboratory."]
    return "\n".join(lines)


def sensitivity(rng: random.Random) -> str:
    rows = normalised_rows(30)
    columns = {f"landed_fx{shock:+.0%}": [float(r[6]) * (1 + shock * rng.uniform(0.6, 1.0)) for r in rows]
               for shock in (-0.01, 0.0, 0.01)}
    top = {r[0] for r in sorted(rows, key=lambda r: float(r[6]))[:5]}
    ranks = "rank changes vs base: 0 in the top 5; " + ", ".join(
        f"{r[0]} {'=' if r[0] in top else rng.choice(['=', '=', '+1', '-1'])}" for r in rows)
    table = frame_text(list(columns), [[columns[name][i] for name in columns] for i in range(len(rows))],
                       index=[r[0] for r in rows], decimals=4)
    return table + "\n\n" + describe_text(columns) + "\n\n" + ranks


def sheet_preview(rng: random.Random) -> str:
    rows = [[r[0], r[1], r[2], f"{float(r[3]):.4f}", f"{float(r[4]):.2f}", f"{float(r[5]):.0%}",
             f"{float(r[6]):.4f}", f"{int(r[7]):,}", r[8], r[9] or "-"] for r in normalised_rows(30)]
    return (f"comparison.xlsx › Normalised v2 (rev {rng.randint(40, 90)}, read-only view)\n"
            + markdown_table(["Supplier", "Cur", "Term", "USD/pc", "Freight/pc", "Duty", "Landed/pc", "MOQ",
                              "Pay days", "Note"], rows))


def approval_output(rng: random.Random) -> str:
    reminders = [{"at": iso(t, millis=False), "event": "auto_reminder", "to": "wang.lei", "channel": "email+dingtalk"}
                 for t in moments(rng, datetime(2026, 6, 27, 1), 4, 80000, 90000)]
    return json_text({"approval_id": "APR-2026-0412", "object": "PR-2026-0877", "status": "pending",
                      "current_step": {"step": 2, "role": "procurement_director", "assignee": "wang.lei",
                                       "since": "2026-06-26T10:15:00+08:00", "sla_breached": True},
                      "amount_cny": 262200.00, "events": reminders,
                      "comments": [{"by": "zhou.min", "at": "2026-06-24T16:02:51+08:00",
                                    "text": "预算内，同意。请采购部尽快完成比价。"}],
                      "delegation": None, "etag": hex_id(rng, 24)})


def po_history(rng: random.Random) -> str:
    skus = ["TX-4410", "TX-4410-BK", "TX-4420", "TX-4430", "TX-3510", "TX-3520", "TX-6600", "TX-6610"]
    vendors = ["B", "G", "D", "R", "A", "L", "M", "old: 慈溪恒星", "old: Foshan Kingtop"]
    rows = []
    for n in range(40):
        qty = rng.choice([3000, 5000, 6000, 8000, 10000, 12000, 15000])
        price = pick_float(rng, 2.2, 3.4, 3, avoid=PROBED)
        rows.append([f"PO-2025-{rng.randint(1000, 1999)}", rng.choice(skus), rng.choice(vendors), qty, price,
                     round(qty * price, 2), rng.choice(["USD", "USD", "CNY"]), f"2025-{rng.randint(1, 12):02d}-"
                     f"{rng.randint(1, 28):02d}", rng.choice(["closed", "closed", "closed", "partial", "claim"])])
    return frame_text(["po", "sku", "vendor", "qty", "unit", "amount", "cur", "date", "state"], rows, decimals=3)


def freight_breakdown(rng: random.Random) -> str:
    rows = [[r[0], rng.choice(["truck", "sea LCL", "sea+truck", "incl."]), rng.randint(0, 40), float(r[4]),
             pick_float(rng, 0.0, 0.05, 3, avoid=PROBED), pick_float(rng, 0.0, 0.02, 3, avoid=PROBED)]
            for r in normalised_rows(30)]
    stats = describe_text({"usd_pc": [float(r[3]) for r in rows], "thc_pc": [float(r[4]) for r in rows]}, 4)
    return frame_text(["supplier", "mode", "cbm", "usd_pc", "thc_pc", "docs_pc"], rows, decimals=3) + "\n\n" + stats


def tariff_listing(rng: random.Random) -> str:
    files = [{"name": f"ruling_{rng.randint(2019, 2026)}_{hex_id(rng, 6)}.pdf", "size": rng.randint(40_000, 400_000)}
             for _ in range(14)]
    files += [{"name": "form_E_guidance_2025.pdf", "size": 233_104}, {"name": "README.txt", "size": 1_422}]
    return json_text({"path": "/shared/procurement/tariffs/", "count": len(files), "files": files}, indent=1)


def inbox_noise(rng: random.Random) -> list[dict[str, str]]:
    return [
        {"from": "export@vidraria-atlantica.example", "subject": "Automatic reply: RFQ-2026-118 — packing details",
         "body": "Thank you for your message. I am out of the office until 6 July with limited access to e-mail. "
                 "For urgent matters please contact our sales desk at +351 22 " + str(rng.randint(1000000, 9999999))},
        {"from": "sales@brightway.example", "subject": "RE: RFQ-2026-118 — production slot",
         "body": "Dear buyer, we can reserve a production slot for week 31 if the PO arrives by 15 July."},
        {"from": "newsletter@steelindex.example", "subject": "SUS304 coil weekly: prices flat",
         "body": "304 cold-rolled coil, Foshan: CNY 14,350/t (-0.3% w/w). Nickel LME USD 16,420/t."},
        {"from": "sales@kuehn-haushalt.example", "subject": "Our offer — validity",
         "body": "Dear Sir or Madam, kindly note our offer's validity date. We remain at your disposal."},
        {"from": "it-notice@hechuan.example", "subject": "ERP maintenance Saturday 02:00-04:00",
         "body": "The ERP will be unavailable during maintenance; approvals submitted in that window are queued."}]


def final_table() -> str:
    rows = [r for r in normalised_rows(30) if not r[9]]
    rows.sort(key=lambda r: float(r[6]) - float(r[6]) * 0.06 * int(r[8]) / 365)
    return markdown_table(["supplier", "currency", "incoterm", "usd_pc", "freight_usd", "duty_rate", "landed_usd",
                           "moq", "pay_days", "effective_usd"],
                          [[*r[:9], float(r[6]) * (1 - 0.06 * int(r[8]) / 365)] for r in rows])


def final_brief() -> str:
    rows = [r for r in normalised_rows(30) if not r[9]]
    rows.sort(key=lambda r: float(r[6]) * (1 - 0.06 * int(r[8]) / 365))
    lines = ["# RFQ-2026-118 比价简报（TX-4410 500ml 保温杯，12,000 只，到上海松江仓）", "",
             "## 结论（非最终推荐）",
             f"按到仓单价并扣除付款条件的资金价值后，目前最低的是供应商 {rows[0][0]}（{float(rows[0][6]):.2f} USD/只），"
             f"其次是 {rows[1][0]} 和 {rows[2][0]}。由于还有待确认事项，暂不做最终推荐。", "",
             "## 排名前六（USD/只，保留两位小数）", "",
             markdown_table(["供应商", "到仓单价", "付款天数", "折算后单价"],
                            [[r[0], float(r[6]), r[8], float(r[6]) * (1 - 0.06 * int(r[8]) / 365)] for r in rows[:6]]),
             "", "## 口径", "- 人民币报价按 2026-06-30 中间价折算，欧元报价按同日欧洲央行参考汇率折算。",
             "- 供应商 C：每箱30件（6/28 修订），运费 0.48 USD/只；H 因 MOQ 20,000 只被排除。",
             "- 付款条件按年化 6% 的资金成本折算。", "",
             "## 待确认", "1. 供应商 F 的装箱数（已发邮件，对方休假至 7 月 6 日）。",
             "2. 请购单 PR-2026-0877 的审批仍在采购总监处，批准前不能下 PO。", "3. K 的报价 7 月 15 日到期。"]
    return "\n".join(lines)


def build() -> Scenario:
    rng = random.Random(SEED)
    run = RunBuilder.opened(TRACE_ID, TOOLS, SYSTEM, TASK)
    run.act("我先看一下 RFQ 文件夹里有哪些文件。", Call("list_files", {"path": "/shared/procurement/RFQ-2026-118/"},
                                                  listing(rng)))
    run.act("There is a comparison workbook already; I'll check its template before filling anything in.",
            Call("query_sheet", {"workbook": "/shared/procurement/RFQ-2026-118/comparison.xlsx",
                                 "sheet": "Template", "range": "A1:O24"}, template_sheet(rng)))
    run.act("The template wants landed USD per piece. Reading the quotes two at a time, starting with A and B.",
            *read_quotes(rng, "A", "B"))
    run.act("A: USD 2.86/pc FOB Ningbo, 24 pcs/ctn, MOQ 10,000, 30 days after B/L — freight to Songjiang still to "
            "add. B: USD 2.71/pc DDP Songjiang, net 60 days, MOQ exactly 12,000. Next C and D.",
            *read_quotes(rng, "C", "D"))
    run.act("C quotes CNY 16.90 per piece EXW Yongkang, 24 pcs per carton, month-end 30 days, and gives no freight at "
            "all, so C's freight is pending. D prices per dozen CIF Shanghai: 34.20 / 12 = 2.85 USD per piece before "
            "port-to-warehouse delivery. Continuing with E and F.", *read_quotes(rng, "E", "F"))
    run.act("E's CNY 21.50 includes 13% VAT (ex-VAT 19.03) and is ex-works with 30% prepayment. F quotes EUR 2.41 FCA "
            "Porto but leaves the packing open — open item: supplier F's carton size TBC; I'll ask them once the first "
            "pass is done. Before converting anything I need one set of FX fixings.",
            Call("fx_rates", {"pair": "USD/CNY", "start": "2026-06-01", "end": "2026-06-30"},
                 fx_series(rng, "USD/CNY", date(2026, 6, 1), 30, USD_CNY, 7.1010, 7.1420), labels=("fx",)),
            Call("fx_rates", {"pair": "EUR/USD", "start": "2026-06-01", "end": "2026-06-30"},
                 fx_series(rng, "EUR/USD", date(2026, 6, 1), 30, EUR_USD, 1.0580, 1.0790)), labels=("pending_f",))
    run.act("Decision: I'll use the 2026-06-30 central parity 7.1235 for every CNY quote, and the ECB reference of "
            "the same day (1.0712 USD per EUR) for the EUR quotes, so every supplier is compared on one date. The "
            "unit for the whole comparison is landed USD per piece at Songjiang: price + freight + duty. Reading G "
            "and H.", *read_quotes(rng, "G", "H"), labels=("fx",))
    run.user("不对，C 家 6 月 28 日改过报价了。No — supplier C's latest quote packs 30 per carton now, not 24. "
             "新的那版在邮件里。", labels=("c_pack",))
    run.act("Thanks — I'll pull C's 6/28 revision from the mail thread before touching C's numbers. From G and H: "
            "G delivers to our Shanghai warehouse at CNY 19.60 with 60 days; H's MOQ is 20,000 pcs. Decision: exclude "
            "supplier H, its MOQ is above our 12,000.",
            Call("search_mail", {"query": "晨光杯业 报价 修订 RFQ-2026-118", "folder": "RFQ-2026-118"}, mail_results(rng, [
                {"from": "sales@cg-cup.example (永康晨光 陈经理)", "subject": "回复：RFQ-2026-118 报价修订（6/28）",
                 "body": "李小姐您好，\n根据贵司的要求我们调整了包装：外箱改为加厚五层，装箱数量由原来的24只/箱改为30只/箱，外箱尺寸"
                         " 52×36×28cm，毛重 11.6kg。单价不变，仍为 ¥16.90/只 EXW 永康。运费我们正在向物流公司询价，"
                         "预计下周初回复。\n附件：报价单_Q2606-412_rev2.pdf\n陈伟 / 永康市晨光杯业有限公司 销售部"},
                {"from": "sales@cg-cup.example (永康晨光 陈经理)", "subject": "RFQ-2026-118 报价",
                 "body": "您好，附件为我司报价单 Q2606-412，请查收。如有问题请随时联系。"},
                {"from": "lina.li@hechuan.example", "subject": "RE: RFQ-2026-118 报价",
                 "body": "陈经理好，收到。请问运费能否报一下到上海松江仓的价格？另外外箱能否改为五层？谢谢。"}])),
            labels=("exclude_h",))
    run.act("Confirmed in C's 6/28 revision: 30 per carton (was 24), carton 52×36×28 cm, price unchanged at CNY 16.90 "
            "EXW; their freight quote is still to come. Reading I and J.", *read_quotes(rng, "I", "J"),
            labels=("c_pack",))
    run.act("I is USD 2.95 FOB Ningbo with 100% prepayment and a low MOQ; J is Vietnamese, FOB Cat Lai, so import "
            "duty applies. Looking up the duty for HS 7323.93.00 from Vietnam.",
            Call("hs_tariff", {"hs_code": "7323.93.00", "origin": "VN"}, tariff_error(rng), labels=("hs_format",)))
    run.act("The tariff service only takes 10-digit HS codes without dots, so 7323.93.00 becomes 7323930000. "
            "Retrying.", Call("hs_tariff", {"hs_code": "7323930000", "origin": "VN"}, tariff_result(rng, "VN")),
            labels=("hs_format",))
    run.user("另外，最终给我的简报请用中文写，数字保留两位小数。", labels=("two_decimals",))
    run.act("好的。J from Vietnam qualifies for 0% under ACFTA with a Form E (MFN would be 10%). Reading K and L.",
            *read_quotes(rng, "K", "L"))
    run.act("K: EUR 2.49 FCA Hamburg, valid only until 07-15, MFN duty 10% will apply. L: CNY 19.60 delivered to "
            "Songjiang. Reading M and N.", *read_quotes(rng, "M", "N"))
    run.act("M prices per carton of 24: 68.40 / 24 = 2.85 USD per piece FOB Shanghai. N is EXW Jinhua plus CNY 0.35 "
            "per piece freight. Before going further I'll check where PR-2026-0877 stands in the ERP.",
            Call("erp_purchase_request", {"pr_id": "PR-2026-0877"}, erp_request(rng), labels=("apr",)))
    run.act("PR-2026-0877 is waiting on the procurement director's approval (王蕾, step 2, pending since 06-26); no "
            "PO can be raised until it clears. Checking whether C has sent its freight yet.",
            Call("search_mail", {"query": "晨光 运费 松江", "folder": "RFQ-2026-118"}, mail_results(rng, [
                {"from": "sales@cg-cup.example (永康晨光 陈经理)", "subject": "回复：运费报价（到上海松江仓）",
                 "body": "李小姐您好，\n物流公司报价出来了：永康到上海松江仓，整车分摊后每箱运费 USD 14.40（含装卸、不含保险），"
                         "按 12,000 只计共 400 箱。另：如需木托盘，每托 ¥85，可选。\n此报价 7 月 31 日前有效。\n陈伟"},
                {"from": "logistics@jiayun.example (佳运物流)", "subject": "永康-松江 整车报价",
                 "body": "9.6 米厢式车 ¥4,850/车，约可装 420 箱（52×36×28cm），回程空驶费另计 ¥600。"}])),
            labels=("apr",))
    run.act("C's freight is in: USD 14.40 per carton, so with the new pack size 14.40 / 30 = 0.48 USD/piece. C's "
            "landed price is 16.90 / 7.1235 + 0.48 = 2.85 USD per piece. Reading O and P.",
            *read_quotes(rng, "O", "P"), labels=("c_freight", "fx"))
    run.user("For the payment terms, please use a 6% annual cost of capital.", labels=("capital",))
    run.act("Understood — payment terms will be valued at 6% a year on the landed price. Reading Q and R.",
            *read_quotes(rng, "Q", "R"), labels=("capital",))
    run.act("Last two, S and T.", *read_quotes(rng, "S", "T"))
    run.act("First pass done: 20/20 quotes read, H excluded for its MOQ. Open items: (1) supplier F's carton size TBC — asking them now; (2) forwarder freight for the FOB "
            "and FCA quotes; (3) K's quote expires 07-15. I'm writing to F.",
            Call("send_email", {"to": "export@vidraria-atlantica.example", "subject": "RFQ-2026-118 — packing details",
                                "body": "Dear Ms Sousa,\nthank you for your quotation. Could you confirm the number of "
                                        "pieces per export carton and the carton dimensions for TX-4410? We need them "
                                        "to compare freight.\nBest regards,\nHechuan Purchasing"},
                 json_text({"status": "sent", "message_id": f"<{hex_id(rng, 16)}@mail.hechuan.example>",
                            "queued_at": "2026-06-30T06:41:12Z", "smtp": "250 2.0.0 OK queued as "
                            + hex_id(rng, 10).upper(), "size_bytes": 1184, "dkim": "pass", "spf": "pass",
                            "recipients": [{"address": "export@vidraria-atlantica.example", "status": "accepted"}],
                            "tracking": {"opens": 0, "read_receipt_requested": False},
                            "folder": "Sent/RFQ-2026-118", "thread_id": hex_id(rng, 16),
                            "headers": {"X-Mailer": "hechuan-procure 3.2", "X-Priority": "3",
                                        "Message-Id-Domain": "mail.hechuan.example",
                                        "Return-Path": "purchasing@hechuan.example"},
                            "audit": [{"at": "2026-06-30T06:41:11Z", "event": "composed", "by": "procurebot"},
                                      {"at": "2026-06-30T06:41:12Z", "event": "dlp_scan", "result": "clean"},
                                      {"at": "2026-06-30T06:41:12Z", "event": "queued"}]})),
            labels=("pending_f",))
    forwarder_body = forwarder_mail(rng)
    run.act("For the FOB/FCA quotes I need our forwarder's rates to Songjiang.",
            Call("search_mail", {"query": "forwarder rates Songjiang Q3 2026", "folder": "Logistics"},
                 mail_results(rng, [forwarder_body])))
    code_table = normalise_code()
    run.act("With the forwarder's rates I can normalise everyone. Computing landed USD per piece in the sandbox.",
            Call("run_python", {"code": code_table}, normalise_output(rng)), labels=("fx",))
    run.act("Writing the normalised table to the workbook.",
            Call("update_sheet", {"workbook": "/shared/procurement/RFQ-2026-118/comparison.xlsx",
                                  "sheet": "Normalised v2", "rows": [[str(v) if not isinstance(v, float) else round(v, 4)
                                                                       for v in row] for row in normalised_rows(30)]},
                 sheet_ack(rng)))
    run.act("Now the payment terms: credit value = landed × 6% × days / 365, subtracted from the landed price.",
            Call("run_python", {"code": "import pandas as pd\nt = pd.read_csv('normalised_v2.csv')\n"
                                        "t['credit_value'] = t.landed_usd * 0.06 * t.pay_days / 365\n"
                                        "t['effective_usd'] = t.landed_usd - t.credit_value\n"
                                        "print(t.sort_values('effective_usd').to_string())"},
                 payment_table(normalised_rows(30), 0.06)), labels=("capital",))
    run.act("Checking the supplier scorecard for quality history before ranking.",
            Call("query_sheet", {"workbook": "/shared/procurement/scorecard_2026H1.xlsx", "sheet": "Scores",
                                 "range": "A1:K60"}, scorecard(rng)))
    run.act("Scores noted. For context, last year's purchase prices for the same SKU family.",
            Call("query_sheet", {"workbook": "/shared/procurement/po_history.xlsx", "sheet": "2025",
                                 "range": "A1:L48"}, po_history(rng)))
    run.act("B and G score well on quality; D had two late deliveries in H1. Looking for B's food-contact certificates.",
            Call("search_mail", {"query": "Brightway LFGB FDA report", "folder": "RFQ-2026-118"}, mail_results(rng, [
                {"from": "qa@brightway.example", "subject": "TX-4410 test reports",
                 "body": lab_report(rng, "SGS", "SHHG2606")},
                {"from": "qa@brightway.example", "subject": "Factory audit summary (BSCI)",
                 "body": "Audit grade B, valid until 2027-03. Minor findings: fire drill records, PPE in polishing."}])))
    run.act("B's reports are in order. Running a sensitivity check on the fixings (±1%) to see if the ranking moves.",
            Call("run_python", {"code": "import pandas as pd, numpy as np\nt = pd.read_csv('normalised_v2.csv')\n"
                                        "for shock in (-0.01, 0, 0.01):\n    ...\nprint(summary.describe())"},
                 sensitivity(rng)))
    run.act("Breaking the freight down per supplier so the buyers can check it against the forwarder's mail.",
            Call("run_python", {"code": "import pandas as pd\nf = pd.read_csv('freight_per_piece.csv')\n"
                                        "print(f.to_string())\nprint(f.groupby('mode').usd_pc.describe())"},
                 freight_breakdown(rng)))
    run.act("Ranking is stable under ±1%: B first, N and J close behind, then T and G. Let me look at the sheet as the buyers will see it.",
            Call("query_sheet", {"workbook": "/shared/procurement/RFQ-2026-118/comparison.xlsx",
                                 "sheet": "Normalised v2", "range": "A1:J22"}, sheet_preview(rng)))
    run.probe("approval-id", "approval", "The approval of PR-2026-0877 was read from the ERP at the start; to check "
              "it the agent needs its id, which only that tool output held.", ["apr"], contains=["APR-2026-0412"])
    run.act("Checking where the approval stands.", Call("approval_status", {"approval_id": "APR-2026-0412"},
                                                         approval_output(rng)))
    run.act("Still pending at the director's step (auto-reminded this morning). Meanwhile, duty for the remaining "
            "non-Chinese suppliers: F, K, Q, S and O.", Call("list_files", {"path": "/shared/procurement/tariffs/"},
                                                            tariff_listing(rng)))
    run.probe("hs-code-format", "failure", "The tariff service rejected a dotted HS code early on; the agent must "
              "still know the 10-digit format when it looks up the remaining origins.", ["hs_format"],
              contains=["without dots"], matches=[r"10[- ]digit"])
    run.act("Looking up the duties for the other origins with the 10-digit code.",
            *[Call("hs_tariff", {"hs_code": "7323930000", "origin": origin}, tariff_result(rng, origin))
              for origin in ("PT", "DE", "TH")])
    run.act("PT and DE pay MFN 10%; TH qualifies for 0% under ACFTA with a Form E. Checking India and Malaysia too.",
            *[Call("hs_tariff", {"hs_code": "7323930000", "origin": origin}, tariff_result(rng, origin))
              for origin in ("IN", "MY")])
    run.act("Duties confirmed. Checking the inbox for anything new on RFQ-2026-118.",
            Call("search_mail", {"query": "RFQ-2026-118", "folder": "Inbox"}, mail_results(rng, inbox_noise(rng))))
    run.user("C 的样品检测结果出来了，QC 通过。可以出简报了。")
    run.act("好的，我先看一下 C 的 QC 报告。", Call("search_mail", {"query": "QC 报告 晨光 样品", "folder": "QC"},
                                              mail_results(rng, [{"from": "qc@hechuan.example",
                                                                  "subject": "样品检测报告 TX-4410 / 晨光",
                                                                  "body": lab_report(rng, "内部QC", "QC2607")}])))
    run.act("Final ranking from the saved table.",
            Call("run_python", {"code": "import pandas as pd\nt = pd.read_csv('normalised_v2.csv')\n"
                                        "print(t[t.note != 'excluded: MOQ'].sort_values('effective_usd')"
                                        ".to_markdown(floatfmt='.4f'))"}, final_table()))
    run.probes(
        ("brief-language-decimals", "constraint", "The user asked in Chinese, mid-run and without any marker, "
         "for the final brief in Chinese with two decimals; this turn writes that brief.", ["two_decimals"],
         ["两位小数"], []),
        ("cost-of-capital", "constraint", "The user gave the 6% annual cost of capital the brief's payment-term "
         "comparison rests on.", ["capital"], ["6% annual cost of capital", "6% a year"], []),
        ("c-pack-30", "fact", "The user corrected C's pack size; C's freight per piece depends on it.",
         ["c_pack"], ["30 per carton", "每箱30件"], []),
        ("fx-parity", "fact", "The agent's chosen fixing for every CNY quote; the brief must state its basis.",
         ["fx"], ["7.1235"], []),
        ("c-freight-derived", "fact", "A figure the agent derived in its own prose (C's freight per piece).",
         ["c_freight"], ["0.48 USD/piece"], [r"14\.40 / 30"]),
        ("exclude-h", "decision", "The agent decided to exclude H for its MOQ; the brief must not rank it.",
         ["exclude_h"], ["exclude supplier H"], []),
        ("f-carton-tbc", "pending", "An open item the agent listed: F's carton size; the brief must list it as "
         "open (the task forbids a final recommendation on incomplete data).", ["pending_f"],
         ["carton size TBC"], []))
    run.say(final_brief())
    run.act("", Call("write_file", {"path": "/shared/procurement/RFQ-2026-118/brief_2026-07-01.md",
                                    "content": final_brief()}, json_text({"written": True, "bytes": 2841,
                                                                          "path": "/shared/procurement/RFQ-2026-118/"
                                                                                  "brief_2026-07-01.md"})))
    run.say("简报已保存到 /shared/procurement/RFQ-2026-118/brief_2026-07-01.md。")
    return run.finish()
