"""Scenario 6: an API migration for a Chinese-speaking user.

Moving a product-sync script from a commerce platform's v1 API (offset pages) to v2 (cursor pages): the bulk
endpoint turns out to be Enterprise-only (403), so the agent decides on per-item PATCH; an OAuth scope request
returns an id the store owner must approve; the user asks politely, in Chinese, to leave prices alone and to run
on the staging store first; open items (SKUs missing in v2, the webhook signing secret) must survive to the end.
"""

from __future__ import annotations

import random
from datetime import datetime

from .builder import Call, RunBuilder, Scenario, tool
from .noise import edge_headers, hex_id, http_text, iso, json_text, moments, token_id

SEED = 6420
TRACE_ID = "scenario-api-migration-zh"
API = "https://api.lumencommerce.example"
SCOPE_REQUEST = "SRQ-7F3K-2291"
TOTAL = 4318

TOOLS = [
    tool("run", "Run a shell command in the repository (catalog-sync/); returns stdout and stderr.",
         {"cmd": "command"}),
    tool("read_file", "Read a file from the repository or its docs.", {"path": "path"}),
    tool("write_file", "Write a file in the repository.", {"path": "path", "content": "file content"}),
    tool("http_request", "Call the Lumen Commerce API with the app's token; returns status, headers and body.",
         {"method": "GET|POST|PATCH|PUT|DELETE", "url": "URL", "params": {"type": "object"},
          "body": {"type": "object"}}, optional=("params", "body")),
]

SYSTEM = """You are a software engineering agent working in the catalog-sync repository of Yunqi Home (云栖家居).
You can run commands, read and write files, and call the Lumen Commerce API with the app's token (production store
yunqi-home, staging store yunqi-home-staging). Explain what you find and decide; keep changes small and tested."""

TASK = """帮我把 catalog-sync 从 Lumen Commerce 的 v1 API 迁移到 v2：v1 在 6 月 30 日下线。
现在的 sync_products.py 用 offset 分页拉全量商品，再按 ERP 导出的数据更新标题、库存、价格和图片。
请先看看 v2 的迁移文档和差异，然后改代码、跑测试。"""


def api_response(rng: random.Random, status: int, reason: str, headers: dict[str, str], body: str) -> str:
    return http_text(status, reason, edge_headers(rng, {**headers, "X-Api-Version": "2026-04"}), body)


def written(path: str, content: str) -> str:
    """What the write_file tool answers: the file as written, numbered."""
    lines = content.splitlines()
    return f"wrote {path} ({len(lines)} lines)\n" + "".join(f"{n:6d}\t{line}\n" for n, line in enumerate(lines, 1))


def product(rng: random.Random, number: int) -> dict[str, object]:
    sku = f"YQ-{rng.choice(['SF', 'TB', 'CH', 'LP', 'RG', 'CU'])}-{rng.randint(1000, 9999)}"
    return {"id": f"gid://lumen/Product/{rng.randint(10**11, 10**12)}", "handle": f"item-{number}-{hex_id(rng, 4)}",
            "title": rng.choice(["北欧布艺沙发", "实木餐桌", "羊毛地毯", "亚麻窗帘", "陶瓷台灯", "藤编收纳篮"])
            + f" {rng.choice(['S', 'M', 'L', 'XL'])}", "status": "active",
            "variants": [{"sku": sku, "price": f"{rng.randint(99, 8999)}.00", "inventory_quantity": rng.randint(0, 400),
                          "barcode": str(rng.randint(10**12, 10**13))}],
            "updated_at": iso(datetime(2026, 6, rng.randint(1, 20), rng.randint(0, 23), rng.randint(0, 59)),
                              millis=False)}


def page(rng: random.Random, count: int, cursor: str | None) -> str:
    items = [product(rng, n) for n in range(count)]
    headers = {"Date": "Mon, 22 Jun 2026 02:14:09 GMT", "Content-Type": "application/json; charset=utf-8",
               "X-RateLimit-Limit": "40", "X-RateLimit-Remaining": str(rng.randint(20, 39)),
               "X-RateLimit-Window": "10s", "X-Request-Id": hex_id(rng, 24), "X-Api-Version": "2026-04"}
    if cursor:
        headers["Link"] = f'<{API}/v2/products?limit=250&page_info={cursor}>; rel="next"'
    return api_response(rng, 200, "OK", headers, json_text({"products": items}, indent=None))


def repo_and_script() -> str:
    tree = """.:
README.md
catalog_sync
docs
exports
logs
requirements.txt
scripts
setup.cfg
sync_products.py
tests

./catalog_sync:
__init__.py
config.py
erp.py
lumen_v1.py
pull.py
sync.py

./docs:
lumen-v2-migration.md
lumen-v2-products-patch.md
lumen-v2-webhooks.md

./exports:
erp_skus_0621.csv

./logs:
sync-v1-2026-06-19.log
sync-v1-2026-06-20.log

./scripts:
compare_skus.py

./tests:
conftest.py
test_erp.py
test_lumen_v1.py
test_webhooks.py
"""
    script = '''"""Nightly product sync: ERP export -> Lumen Commerce store (v1 API)."""
import logging
import sys
import time

from catalog_sync.config import load_config
from catalog_sync.erp import read_export
from catalog_sync.lumen_v1 import LumenV1

log = logging.getLogger("sync")
PAGE_SIZE = 100


def fetch_all(client):
    """All products, page by page (offset pagination)."""
    products, offset = [], 0
    while True:
        batch = client.get("/v1/products.json", params={"limit": PAGE_SIZE, "offset": offset})["products"]
        products.extend(batch)
        if len(batch) < PAGE_SIZE:
            return products
        offset += PAGE_SIZE


def main(argv):
    config = load_config(argv)
    client = LumenV1(config.store, config.token)
    erp = {row.sku: row for row in read_export(config.export_path)}
    updated = 0
    for product in fetch_all(client):
        for variant in product["variants"]:
            row = erp.get(variant["sku"])
            if row is None:
                continue
            changes = row.diff(product, variant)  # title, inventory, price, images
            if changes:
                client.put(f"/v1/products/{product['id']}.json", {"product": changes})
                updated += 1
                time.sleep(0.5)  # v1: 2 requests per second
    log.info("updated %d products", updated)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''
    return tree + "\n" + script


def migration_doc() -> str:
    return """# Migrating from API v1 to v2

API v1 is retired on **2026-06-30**. After that date, v1 calls return `410 Gone`.

## What changes

| Topic | v1 | v2 |
|---|---|---|
| Base path | `/v1/...json` | `/v2/...` (JSON only, no suffix) |
| Auth | `X-Lumen-Access-Token` | `Authorization: Bearer <token>` |
| IDs | numeric | global ids: `gid://lumen/Product/123` (numeric part accepted in paths) |
| Pagination | `limit` + `offset` | cursor: `limit` (max 250) + `page_info` from the `Link` header |
| Rate limits | 2 requests/s per app | leaky bucket: 40 requests per 10 s per store, `X-RateLimit-*` headers |
| Updates | `PUT` whole product | `PATCH` changed fields only |
| Bulk writes | — | `POST /v2/products/bulk` (up to 250 operations), on eligible plans |
| Webhooks | unsigned | HMAC-SHA256 signature in `X-Lumen-Signature` |
| Prices | strings with 2 decimals | strings with 2 decimals; `compare_at_price` separate |

## Pagination

Request the first page with `limit`. If there are more results, the response carries a `Link` header:

    Link: <https://api.lumencommerce.example/v2/products?limit=250&page_info=eyJsYXN0X2lk...>; rel="next"

Follow `rel="next"` until it is absent. Do not build `page_info` values yourself. Filters (status, updated_at_min,
...) can only be sent with the first request; the cursor carries them.

## Rate limits

Each store has a bucket of 40 requests that drains at 4 requests per second. When it is empty, requests get `429`
with `Retry-After`. Bulk operations count as one request.

## Scopes

v2 splits write access: `write_products` (titles, descriptions, media, variants) and `write_inventory`
(inventory levels). Apps request additional scopes with `POST /v2/oauth/scope_requests`; the store owner approves
them in the admin. Until then, writes return `403 insufficient_scope`.

## Errors

Errors use one shape: `{"error": {"code": "...", "message": "...", "request_id": "..."}}`. Codes you will meet
while migrating: `invalid_cursor`, `insufficient_scope`, `plan_required`, `not_found`, `rate_limited`,
`validation_failed`.

## Checklist

1. Switch auth header and base path.
2. Replace offset pagination by cursors.
3. Replace `PUT` by `PATCH` with changed fields.
4. Request the new scopes.
5. Verify webhook signatures.
6. Run against a development or staging store before production.

## Examples

First page and the next one:

    GET /v2/products?limit=250&status=active
    200 OK
    Link: <https://api.lumencommerce.example/v2/products?limit=250&page_info=eyJsYXN0X2lkIjo...>; rel="next"

    GET /v2/products?limit=250&page_info=eyJsYXN0X2lkIjo...
    200 OK
    Link: <...page_info=eyJkaXJlY3Rpb24...>; rel="previous", <...page_info=eyJsYXN0X2lkIjo2...>; rel="next"

Updating a title and an inventory level (multi-location store):

    PATCH /v2/products/7771234
    {"product": {"title": "New title", "variants": [{"id": "gid://lumen/ProductVariant/9",
      "inventory_levels": [{"location_id": "gid://lumen/Location/1201", "available": 12}]}]}}

## Deprecation headers

Until the retirement date, v1 responses carry `Deprecation: true` and `Sunset: Tue, 30 Jun 2026 00:00:00 GMT`.
Monitor them in your logs to find code paths still on v1.
"""


def shop_info(rng: random.Random) -> str:
    return api_response(rng, 200, "OK", {"Date": "Mon, 22 Jun 2026 02:12:51 GMT", "Content-Type": "application/json",
                                 "X-RateLimit-Limit": "40", "X-RateLimit-Remaining": "39",
                                 "X-Request-Id": hex_id(rng, 24)},
                     json_text({"shop": {"id": "gid://lumen/Shop/88412", "name": "云栖家居 Yunqi Home",
                                         "domain": "yunqi-home.lumenstore.example", "plan": {"name": "growth",
                                                                                           "display": "Growth",
                                                                                           "billing_cycle": "annual"},
                                         "currency": "CNY", "timezone": "Asia/Shanghai", "locale": "zh-CN",
                                         "created_at": "2021-03-08T09:12:44+08:00",
                                         "features": {"multi_location_inventory": True, "b2b": False,
                                                      "bulk_operations": False, "staff_accounts": 15,
                                                      "api_calls_per_10s": 40},
                                         "locations": [{"id": f"gid://lumen/Location/{rng.randint(1000, 9999)}",
                                                        "name": name} for name in ("杭州仓", "上海前置仓", "门店-西湖")],
                                         "staging_store": "yunqi-home-staging"},
                                "app": {"id": "catalog-sync", "scopes": ["read_products", "read_inventory"],
                                        "installed_at": "2023-05-19T10:01:22+08:00"}}))


def count_output(rng: random.Random) -> str:
    return api_response(rng, 200, "OK", {"Date": "Mon, 22 Jun 2026 02:14:31 GMT", "Content-Type": "application/json",
                                 "X-RateLimit-Limit": "40", "X-RateLimit-Remaining": "37",
                                 "X-Request-Id": hex_id(rng, 24), "X-Api-Version": "2026-04",
                                 "Cache-Control": "no-store", "Server": "lumen-edge"},
                     json_text({"count": TOTAL, "by_status": {"active": 4102, "draft": 216},
                                "note": "archived products are not counted unless status=archived is given"}))


def bulk_forbidden(rng: random.Random) -> str:
    return api_response(rng, 403, "Forbidden", {"Date": "Mon, 22 Jun 2026 02:20:07 GMT",
                                        "Content-Type": "application/json", "X-Request-Id": hex_id(rng, 24),
                                        "X-RateLimit-Remaining": "38", "X-Api-Version": "2026-04"},
                     json_text({"error": {"code": "plan_required",
                                          "message": "Bulk operations are available on the Enterprise plan only. "
                                                     "Current plan: growth.",
                                          "docs": "https://developers.lumencommerce.example/plans#bulk",
                                          "request_id": hex_id(rng, 24)}}))


def scope_missing(rng: random.Random) -> str:
    return api_response(rng, 403, "Forbidden", {"Date": "Mon, 22 Jun 2026 02:21:40 GMT",
                                        "Content-Type": "application/json", "X-Request-Id": hex_id(rng, 24),
                                        "WWW-Authenticate": 'Bearer error="insufficient_scope", '
                                                            'scope="write_products"'},
                     json_text({"error": {"code": "insufficient_scope", "message": "This action requires the "
                                          "write_products scope. Granted: read_products, read_inventory.",
                                          "request_id": hex_id(rng, 24)}}))


def scope_requested(rng: random.Random) -> str:
    return api_response(rng, 201, "Created", {"Date": "Mon, 22 Jun 2026 02:23:02 GMT", "Content-Type": "application/json",
                                      "Location": f"{API}/v2/oauth/scope_requests/{SCOPE_REQUEST}",
                                      "X-Request-Id": hex_id(rng, 24)},
                     json_text({"scope_request": {"id": SCOPE_REQUEST, "status": "pending_owner_approval",
                                                  "scopes": ["write_products", "write_inventory"],
                                                  "requested_at": "2026-06-22T02:23:02Z",
                                                  "approver": "store owner (admin › Apps › catalog-sync)",
                                                  "expires_at": "2026-07-06T02:23:02Z",
                                                  "notification": "email sent to owner@yunqi-home.example"}}))


def scope_approved(rng: random.Random) -> str:
    return api_response(rng, 200, "OK", {"Date": "Mon, 22 Jun 2026 05:02:18 GMT", "Content-Type": "application/json",
                                 "X-Request-Id": hex_id(rng, 24)},
                     json_text({"scope_request": {"id": SCOPE_REQUEST, "status": "approved",
                                                  "scopes": ["write_products", "write_inventory"],
                                                  "approved_by": "林蔚 (owner)", "approved_at": "2026-06-22T04:51:37Z",
                                                  "token_refresh_required": False}}))


def access_scopes(rng: random.Random) -> str:
    return api_response(rng, 200, "OK", {"Date": "Mon, 22 Jun 2026 05:02:40 GMT", "Content-Type": "application/json",
                                 "X-Request-Id": hex_id(rng, 24)},
                     json_text({"access_scopes": [{"handle": handle} for handle in (
                         "read_products", "read_inventory", "write_products", "write_inventory")],
                         "token": {"type": "offline", "created_at": "2023-05-19T10:01:22+08:00",
                                   "last_used_at": "2026-06-22T05:02:18Z"}}))


def pytest_lines(rng: random.Random, names: list[str], failed: set[str]) -> str:
    lines = [f"{name} {'FAILED' if name in failed else 'PASSED'}".ljust(70) + f" [{100 * (n + 1) // len(names):3d}%]"
             for n, name in enumerate(names)]
    return "\n".join(lines)


def old_tests(rng: random.Random) -> str:
    names = [f"tests/test_{module}.py::test_{name}" for module, tests in (
        ("erp", ["read_export", "skips_blank_sku", "diff_title", "diff_inventory", "diff_price", "diff_images",
                 "gbk_encoding", "duplicate_sku_warns"]),
        ("lumen_v1", ["get_pages", "put_product", "retry_on_429", "auth_header", "offset_stops_on_short_page"]),
        ("webhooks", ["parses_product_update", "ignores_unknown_topic"])) for name in tests]
    return (pytest_lines(rng, names, set()) + f"\n\n============================== {len(names)} passed in "
            f"{rng.uniform(0.8, 1.9):.2f}s ==============================")


def v1_client_source() -> str:
    return '''"""Lumen Commerce API v1 client (offset pagination, PUT updates)."""
import logging
import time

import requests

log = logging.getLogger("lumen_v1")
BASE = "https://{store}.lumenstore.example/admin/api"


class LumenV1:
    def __init__(self, store, token, session=None):
        self.base = BASE.format(store=store)
        self.token = token
        self.session = session or requests.Session()

    def _headers(self):
        return {"X-Lumen-Access-Token": self.token, "Content-Type": "application/json"}

    def get(self, path, params=None):
        return self._call("GET", path, params=params)

    def put(self, path, payload):
        return self._call("PUT", path, json=payload)

    def _call(self, method, path, **kwargs):
        for attempt in range(4):
            response = self.session.request(method, self.base + path, headers=self._headers(), timeout=30,
                                            **kwargs)
            if response.status_code == 429:
                wait = float(response.headers.get("Retry-After", 2))
                log.warning("429 on %s %s, waiting %.1fs", method, path, wait)
                time.sleep(wait)
                continue
            if response.status_code >= 500 and attempt < 3:
                time.sleep(2 ** attempt)
                continue
            response.raise_for_status()
            return response.json()
        raise RuntimeError(f"giving up on {method} {path}")
'''


def erp_source() -> str:
    return '''"""Read the ERP export (GBK-encoded CSV) into rows."""
import csv
from dataclasses import dataclass, field
from typing import Iterator, List


@dataclass
class Row:
    sku: str
    title: str
    inventory: int
    price: str
    images: List[str] = field(default_factory=list)
    category: str = ""
    status: str = "active"

    def diff(self, product, variant):
        """v1-shaped changes: title, inventory, price, images."""
        changes = {}
        if self.title != product["title"]:
            changes["title"] = self.title
        if self.inventory != variant["inventory_quantity"] or self.price != variant["price"]:
            changes["variants"] = [{"id": variant["id"], "inventory_quantity": self.inventory,
                                    "price": self.price}]
        if self.images and self.images != [image["src"] for image in product.get("images", [])]:
            changes["images"] = [{"src": url} for url in self.images]
        return changes


def read_export(path) -> Iterator[Row]:
    with open(path, encoding="gbk", newline="") as handle:
        for record in csv.DictReader(handle):
            if not record["sku"].strip():
                continue
            images = [record[key] for key in ("image_1", "image_2") if record.get(key)]
            yield Row(record["sku"].strip(), record["title"].strip(), int(record["inventory"] or 0),
                      record["price"], images, record.get("category", ""), record.get("erp_status", "active"))
'''


def webhook_list(rng: random.Random) -> str:
    hooks = [{"id": f"gid://lumen/Webhook/{rng.randint(10**6, 10**7)}", "topic": topic,
              "address": address, "api_version": version, "created_at": iso(datetime(2025, rng.randint(1, 12),
                                                                                      rng.randint(1, 28), 9),
                                                                             millis=False),
              "last_delivery": {"at": iso(datetime(2026, 6, rng.randint(15, 21), rng.randint(0, 23)), millis=False),
                                "status": rng.choice([200, 200, 200, 500])}, "failures_24h": rng.randint(0, 3)}
             for topic, address, version in (("products/update", "https://hooks.yunqi.example/lumen/products", "v1"),
                                             ("products/delete", "https://hooks.yunqi.example/lumen/products", "v1"),
                                             ("orders/create", "https://oms.yunqi.example/lumen/orders", "v1"),
                                             ("app/uninstalled", "https://hooks.yunqi.example/lumen/app", "v1"))]
    return api_response(rng, 200, "OK", {"Date": "Mon, 22 Jun 2026 03:01:12 GMT", "Content-Type": "application/json",
                                 "X-RateLimit-Remaining": "38", "X-Request-Id": hex_id(rng, 24)},
                     json_text({"webhooks": hooks, "note": "v1 webhooks stop on 2026-06-30; re-register under v2 "
                                                           "to receive signed deliveries"}))


def locations(rng: random.Random) -> str:
    return api_response(rng, 200, "OK", {"Date": "Mon, 22 Jun 2026 04:41:55 GMT", "Content-Type": "application/json",
                                 "X-RateLimit-Remaining": "39", "X-Request-Id": hex_id(rng, 24)},
                     json_text({"locations": [{"id": f"gid://lumen/Location/{number}", "name": name,
                                               "address": address, "active": True, "fulfills_online_orders": online,
                                               "inventory_items": rng.randint(900, 4400)}
                                              for number, name, address, online in (
                                                  (1201, "杭州仓", "浙江省杭州市余杭区仓前街道 88 号", True),
                                                  (1202, "上海前置仓", "上海市闵行区莘庄工业区春中路 21 号", True),
                                                  (1207, "门店-西湖", "杭州市西湖区北山街 6 号", False))]}))


def api_usage(rng: random.Random) -> str:
    buckets = [{"minute": f"05:{m:02d}", "requests": rng.randint(150, 240), "throttled": rng.randint(0, 2)}
               for m in range(10, 34, 2)]
    return api_response(rng, 200, "OK", {"Date": "Mon, 22 Jun 2026 05:41:03 GMT", "Content-Type": "application/json",
                                 "X-Request-Id": hex_id(rng, 24)},
                     json_text({"store": "yunqi-home-staging", "window": "1h", "limit_per_10s": 40,
                                "requests": sum(b["requests"] for b in buckets), "throttled": sum(
                                    b["throttled"] for b in buckets), "by_minute": buckets,
                                "top_endpoints": [{"endpoint": "PATCH /v2/products/{id}", "share": 0.71},
                                                  {"endpoint": "GET /v2/products", "share": 0.22},
                                                  {"endpoint": "POST /v2/media", "share": 0.07}]}))


def staging_resync(rng: random.Random) -> str:
    lines = [f"{iso(t)} INFO  pull: page {n:2d} status=200 products=250" for n, t in
             enumerate(moments(rng, datetime(2026, 6, 22, 5, 43), 17, 2, 5), 1)]
    lines.append(f"{iso(datetime(2026, 6, 22, 5, 44, 30))} INFO  sync: PATCH /v2/products/{rng.randint(10**11, 10**12)}"
                 " fields=variants status=200 (previous 412 conflict resolved)")
    lines.append("INFO  sync: sync done: {'updated': 1, 'unchanged': 4313, 'not_in_erp': 4, 'conflicts': 0}")
    return "\n".join(lines)


def webhook_created(rng: random.Random, topic: str) -> str:
    return api_response(rng, 201, "Created", {"Date": "Mon, 22 Jun 2026 03:02:44 GMT",
                                              "Content-Type": "application/json", "X-Request-Id": hex_id(rng, 24)},
                        json_text({"webhook": {"id": f"gid://lumen/Webhook/{rng.randint(10**6, 10**7)}",
                                               "topic": topic, "address": "https://hooks.yunqi.example/lumen/v2",
                                               "api_version": "2026-04", "format": "json",
                                               "signed": True, "signing_secret_set": False,
                                               "created_at": "2026-06-22T03:02:44Z"},
                                   "warning": "no signing secret configured for this app yet; deliveries are signed "
                                              "once a secret is created in the admin"}))


def pull_diff() -> str:
    return """diff --git a/catalog_sync/pull.py b/catalog_sync/pull.py
index 3b1e2c0..9d4f7a1 100644
--- a/catalog_sync/pull.py
+++ b/catalog_sync/pull.py
@@ -1,33 +1,55 @@
-\"\"\"Pull every product into a JSON-lines file (v1, offset pages).\"\"\"
+\"\"\"Pull every product into a JSON-lines file (v2, cursor pages; resumes when a cursor expires).\"\"\"
 import json
 import logging
+import time
+
+import requests

-from catalog_sync.lumen_v1 import LumenV1
+from catalog_sync.lumen_v2 import LumenV2

 log = logging.getLogger("pull")
+MAX_BACKOFF_S = 60  # a cursor lives 10 minutes; never wait anywhere near that


-def pull(client, out_path):
-    offset, written = 0, 0
+def pull(client: LumenV2, out_path: str) -> int:
+    seen: set[str] = set()
+    since = None
     with open(out_path, "w", encoding="utf-8") as out:
-        while True:
-            batch = client.get("/v1/products.json", params={"limit": 100, "offset": offset})["products"]
-            for product in batch:
-                out.write(json.dumps(product, ensure_ascii=False) + "\\n")
-                written += 1
-            if len(batch) < 100:
-                return written
-            offset += 100
+        while True:
+            filters = {"updated_at_min": since, "order": "updated_at asc"} if since else {"order": "updated_at asc"}
+            try:
+                for product in client.products(**filters):
+                    if product["id"] in seen:
+                        continue
+                    seen.add(product["id"])
+                    since = product["updated_at"]
+                    out.write(json.dumps(product, ensure_ascii=False) + "\\n")
+                log.info("done, %d products written to %s", len(seen), out_path)
+                return len(seen)
+            except requests.HTTPError as error:
+                if error.response is None or error.response.status_code != 410:
+                    raise
+                log.warning("cursor expired after %d products; resuming from updated_at >= %s", len(seen), since)
+                time.sleep(1)
"""


def lint_output(rng: random.Random) -> str:
    return (f"$ ruff check catalog_sync tests\nAll checks passed!\n$ mypy catalog_sync\nSuccess: no issues found in "
            f"{rng.randint(7, 9)} source files")


CLIENT_V1 = '''"""Lumen Commerce API v2 client: cursor pagination, per-item PATCH, rate limiting."""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import requests

API = "https://api.lumencommerce.example"
NEXT_LINK = re.compile(r'<([^>]+)>;\\s*rel=next')
BUCKET = 40          # requests per 10 s per store
DRAIN_PER_S = 4.0


@dataclass
class LumenV2:
    store: str
    token: str
    session: requests.Session = field(default_factory=requests.Session)
    _last: float = 0.0

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "X-Lumen-Store": self.store}

    def _wait(self) -> None:
        gap = 1.0 / DRAIN_PER_S - (time.monotonic() - self._last)
        if gap > 0:
            time.sleep(gap)
        self._last = time.monotonic()

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        for attempt in range(5):
            self._wait()
            response = self.session.request(method, API + path, headers=self._headers(), timeout=30, **kwargs)
            if response.status_code != 429:
                response.raise_for_status()
                return response
            time.sleep(float(response.headers.get("Retry-After", 2 ** attempt)))
        raise RuntimeError(f"rate limited: {method} {path}")

    def products(self, **filters: Any) -> Iterator[dict[str, Any]]:
        """Every product, following the Link header's next cursor."""
        response = self.request("GET", "/v2/products", params={"limit": 250, **filters})
        while True:
            yield from response.json()["products"]
            match = NEXT_LINK.search(response.headers.get("Link", ""))
            if not match:
                return
            response = self.request("GET", match.group(1).removeprefix(API))

    def patch_product(self, product_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        numeric = product_id.rsplit("/", 1)[-1]
        return self.request("PATCH", f"/v2/products/{numeric}", json={"product": changes}).json()["product"]
'''

CLIENT_TESTS = '''"""LumenV2 against a fake API (responses)."""
import responses

from catalog_sync.lumen_v2 import API, LumenV2


def page(ids, next_cursor=None):
    headers = {}
    if next_cursor:
        headers["Link"] = f'<{API}/v2/products?limit=250&page_info={next_cursor}>; rel="next"'
    return {"json": {"products": [{"id": f"gid://lumen/Product/{i}"} for i in ids]}, "headers": headers}


@responses.activate
def test_products_follow_the_cursor():
    responses.get(f"{API}/v2/products", **page([1, 2], "abc"), match=[responses.matchers.query_param_matcher(
        {"limit": "250"})])
    responses.get(f"{API}/v2/products", **page([3]), match=[responses.matchers.query_param_matcher(
        {"limit": "250", "page_info": "abc"})])
    client = LumenV2("yunqi-home-staging", "t")
    assert [p["id"].rsplit("/", 1)[-1] for p in client.products()] == ["1", "2", "3"]


@responses.activate
def test_patch_sends_only_changes():
    responses.patch(f"{API}/v2/products/7", json={"product": {"id": "gid://lumen/Product/7", "title": "x"}})
    LumenV2("s", "t").patch_product("gid://lumen/Product/7", {"title": "x"})
    assert responses.calls[0].request.body == b'{"product": {"title": "x"}}'


@responses.activate
def test_429_waits_for_retry_after(monkeypatch):
    slept = []
    monkeypatch.setattr("time.sleep", slept.append)
    responses.get(f"{API}/v2/products", status=429, headers={"Retry-After": "3"})
    responses.get(f"{API}/v2/products", **page([1]))
    assert len(list(LumenV2("s", "t").products())) == 1
    assert 3.0 in slept
'''


def client_test_failure(rng: random.Random) -> str:
    source = CLIENT_TESTS.split("@responses.activate\n", 2)[1].split("\n\n\n", 1)[0].splitlines()
    shown = ["    @responses.activate"] + [(">   " if line.lstrip().startswith("assert") else "    ") + line
                                         for line in source]
    return ("tests/test_lumen_v2.py::test_products_follow_the_cursor FAILED                     [ 33%]\n"
            "tests/test_lumen_v2.py::test_patch_sends_only_changes PASSED                       [ 66%]\n"
            "tests/test_lumen_v2.py::test_429_waits_for_retry_after PASSED                      [100%]\n\n"
            "=================================== FAILURES ===================================\n"
            "_______________________ test_products_follow_the_cursor ________________________\n\n"
            + "\n".join(shown) + """
E       AssertionError: assert ['1', '2'] == ['1', '2', '3']
E         
E         Right contains one more item: '3'
E         
E         Full diff:
E           [
E               '1',
E               '2',
E         -     '3',
E           ]

tests/test_lumen_v2.py:21: AssertionError
=========================== short test summary info ============================
FAILED tests/test_lumen_v2.py::test_products_follow_the_cursor - AssertionError: assert ['1', '2'] == ['1', '2', '3']
""" + f"========================= 1 failed, 2 passed in {rng.uniform(0.3, 0.9):.2f}s ==========================")


def client_test_pass(rng: random.Random) -> str:
    return ("tests/test_lumen_v2.py::test_products_follow_the_cursor PASSED                     [ 33%]\n"
            "tests/test_lumen_v2.py::test_patch_sends_only_changes PASSED                       [ 66%]\n"
            "tests/test_lumen_v2.py::test_429_waits_for_retry_after PASSED                      [100%]\n\n"
            f"============================== 3 passed in {rng.uniform(0.3, 0.9):.2f}s "
            "==============================")


def sku_compare(rng: random.Random) -> str:
    missing = [f"YQ-{rng.choice(['SF', 'TB', 'CH', 'LP', 'RG', 'CU'])}-{rng.randint(1000, 9999)}" for _ in range(37)]
    lines = [f"{iso(t)} INFO compare: loaded 4,351 ERP rows (exports/erp_skus_0621.csv, encoding gbk)"
             for t in moments(rng, datetime(2026, 6, 22, 2, 40), 1, 1, 2)]
    lines += ["INFO compare: fetched store products via v2 (read_products), 18 pages",
              "INFO compare: matched 4,314 SKUs; ERP-only 37; store-only 4 (drafts without ERP row)",
              "ERP-only SKUs (not found in store):"]
    lines += [f"  {sku}  erp_status={rng.choice(['active', 'active', 'discontinued', 'seasonal'])}  "
              f"last_erp_change=2026-0{rng.randint(1, 6)}-{rng.randint(10, 28)}" for sku in missing]
    lines += ["store-only SKUs:"] + [f"  YQ-DR-{rng.randint(1000, 9999)}  status=draft" for _ in range(4)]
    return "\n".join(lines)


def archived(rng: random.Random) -> str:
    return page(rng, 9, None).replace('"status": "active"', '"status": "archived"')


def webhook_doc() -> str:
    return """# Webhooks (v2)

Subscribe with `POST /v2/webhooks` (`topic`, `address`). Topics used by catalog apps: `products/update`,
`products/delete`, `inventory_levels/update`.

Every delivery carries:

- `X-Lumen-Topic`: the topic
- `X-Lumen-Webhook-Id`: unique per delivery (use it to drop duplicates)
- `X-Lumen-Signature`: base64 of HMAC-SHA256 over the raw body, keyed with the app's signing secret

The signing secret is created in the admin (Apps › your app › Webhooks › Signing secret) and shown once. Rotate it
there; during rotation both secrets are valid for 24 hours.

Respond with 2xx within 5 seconds; otherwise the delivery is retried with backoff for 48 hours (19 attempts).
Deliveries can arrive out of order: compare `updated_at` before applying.

```python
import base64, hashlib, hmac

def verify(raw_body: bytes, header: str, secret: str) -> bool:
    digest = hmac.new(secret.encode(), raw_body, hashlib.sha256).digest()
    return hmac.compare_digest(base64.b64encode(digest).decode(), header)
```
"""


WEBHOOK_CODE = '''"""Webhook receiver for products/update and inventory_levels/update (v2, signed)."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from typing import Any

SEEN_LIMIT = 10_000


class SignatureError(Exception):
    pass


def verify(raw_body: bytes, header: str, secret: str) -> None:
    digest = hmac.new(secret.encode(), raw_body, hashlib.sha256).digest()
    if not hmac.compare_digest(base64.b64encode(digest).decode(), header or ""):
        raise SignatureError("bad signature")


def handle(raw_body: bytes, headers: dict[str, str], seen: set[str], apply: Any) -> int:
    secret = os.environ.get("LUMEN_WEBHOOK_SECRET")
    if not secret:
        return 503  # not configured yet: Lumen retries for 48 h
    try:
        verify(raw_body, headers.get("X-Lumen-Signature", ""), secret)
    except SignatureError:
        return 401
    delivery = headers.get("X-Lumen-Webhook-Id", "")
    if delivery in seen:
        return 200
    if len(seen) > SEEN_LIMIT:
        seen.clear()
    seen.add(delivery)
    apply(headers.get("X-Lumen-Topic", ""), json.loads(raw_body))
    return 200
'''


def webhook_tests(rng: random.Random) -> str:
    names = ["test_parses_product_update", "test_ignores_unknown_topic", "test_bad_signature_is_401",
             "test_missing_secret_is_503", "test_duplicate_delivery_is_ignored", "test_out_of_order_update_skipped"]
    return (pytest_lines(rng, [f"tests/test_webhooks.py::{n}" for n in names], set()) +
            f"\n\n============================== 6 passed in {rng.uniform(0.2, 0.6):.2f}s "
            "==============================")


def pull_lines(rng: random.Random, pages: int, expire_at: int | None) -> str:
    lines = []
    moment = datetime(2026, 6, 22, 3, 5)
    fetched = 0
    for number in range(1, pages + 1):
        moment = moments(rng, moment, 1, 2, 6)[0]
        if expire_at and number == expire_at:
            lines.append(f"{iso(moment)} WARN  pull: 429 rate_limited, Retry-After 720s (bucket empty after burst)")
            moment = moments(rng, moment, 1, 720, 725)[0]
            lines.append(f"{iso(moment)} ERROR pull: GET /v2/products?page_info=eyJ{token_id(rng, 20)}… -> 410 Gone "
                         '{"error": {"code": "invalid_cursor", "message": "cursor_expired: page_info is valid for '
                         '10 minutes"}}')
            lines.append("Traceback (most recent call last):\n  File \"/repo/catalog_sync/pull.py\", line 41, in main\n"
                         "    for product in client.products(**filters):\n  File \"/repo/catalog_sync/lumen_v2.py\", "
                         "line 51, in products\n    response = self.request(\"GET\", match.group(1).removeprefix(API))\n"
                         "  File \"/repo/catalog_sync/lumen_v2.py\", line 36, in request\n    "
                         "response.raise_for_status()\nrequests.exceptions.HTTPError: 410 Client Error: Gone for url: "
                         f"{API}/v2/products?limit=250&page_info=eyJ{token_id(rng, 20)}")
            return "\n".join(lines)
        got = 250 if number < pages else TOTAL - 250 * (pages - 1)
        fetched += got
        lines.append(f"{iso(moment)} INFO  pull: page {number:2d} status=200 products={got} total={fetched} "
                     f"bucket={rng.randint(2, 38)}/40 request_id={hex_id(rng, 12)}")
    lines.append(f"{iso(moment)} INFO  pull: done, {fetched} products written to /tmp/staging.jsonl")
    return "\n".join(lines)


def staging_pull(rng: random.Random) -> str:
    return pull_lines(rng, 18, expire_at=11)


def staging_pull_ok(rng: random.Random) -> str:
    return pull_lines(rng, 18, expire_at=None)


def cursor_doc() -> str:
    return ("27:## Pagination\n28-\n29-Request the first page with `limit`. If there are more results, the response "
            "carries a `Link` header:\n--\n35-Follow `rel=\"next\"` until it is absent. Do not build `page_info` values "
            "yourself. Filters (status, updated_at_min,\n36-...) can only be sent with the first request; the cursor "
            "carries them.\n37-\n38-A `page_info` cursor is valid for 10 minutes after the response that issued it. "
            "An expired\n39-cursor returns `410` with `invalid_cursor`; restart from the first page, narrowing with\n"
            "40-`updated_at_min` if you keep track of progress.\n--\n61-`invalid_cursor`, `insufficient_scope`, "
            "`plan_required`, `not_found`, `rate_limited`,")


def resume_patch(rng: random.Random) -> str:
    return (" catalog_sync/pull.py      | 31 ++++++++++++++++++++++++-------\n catalog_sync/lumen_v2.py  |  9 "
            "+++++++--\n tests/test_pull.py        | 42 ++++++++++++++++++++++++++++++++++++++++++\n 3 files "
            "changed, 73 insertions(+), 9 deletions(-)\n" + pytest_lines(rng, [
                f"tests/test_{m}.py::test_{n}" for m, n in (
                    ("pull", "resumes_after_410"), ("pull", "resume_skips_seen_ids"), ("pull", "backoff_capped_at_60s"),
                    ("lumen_v2", "products_follow_the_cursor"), ("lumen_v2", "patch_sends_only_changes"),
                    ("lumen_v2", "429_waits_for_retry_after"), ("erp", "read_export"), ("erp", "diff_title"),
                    ("erp", "diff_inventory"), ("erp", "diff_price"), ("erp", "diff_images"),
                    ("webhooks", "bad_signature_is_401"), ("webhooks", "missing_secret_is_503"))], set())
            + f"\n\n============================== 27 passed in {rng.uniform(1.2, 2.4):.2f}s "
              "==============================")


def erp_head(rng: random.Random) -> str:
    lines = ["sku,title,inventory,price,image_1,image_2,category,erp_status,last_change"]
    for _ in range(40):
        sku = f"YQ-{rng.choice(['SF', 'TB', 'CH', 'LP', 'RG', 'CU'])}-{rng.randint(1000, 9999)}"
        lines.append(f"{sku},{rng.choice(['北欧布艺沙发', '实木餐桌', '羊毛地毯', '亚麻窗帘', '陶瓷台灯', '藤编收纳篮'])} "
                     f"{rng.choice(['S', 'M', 'L'])},{rng.randint(0, 400)},{rng.randint(99, 8999)}.00,"
                     f"https://img.yunqi.example/{sku}-1.jpg,https://img.yunqi.example/{sku}-2.jpg,"
                     f"{rng.choice(['客厅', '餐厅', '卧室', '收纳'])},active,2026-06-{rng.randint(1, 21):02d}")
    return "\n".join(lines) + "\n4352 exports/erp_skus_0621.csv"


def v1_log(rng: random.Random) -> str:
    lines = []
    for moment in moments(rng, datetime(2026, 6, 20, 1, 0), 60, 20, 90):
        field_changed = rng.choice(["inventory", "inventory", "inventory", "title", "images", "price"])
        lines.append(f"{iso(moment)} INFO sync: PUT /v1/products/{rng.randint(10**8, 10**9)}.json "
                     f"changes={field_changed} status=200 {rng.randint(180, 900)}ms")
    lines.append("2026-06-20T02:31:09.112Z INFO sync: updated 1,214 products (inventory 941, title 121, images 96, "
                 "price 56)")
    return "\n".join(lines)


def patch_doc() -> str:
    return """# PATCH /v2/products/{id}

Send only the fields that change, wrapped in `product`. Unknown fields are rejected (`validation_failed`).

| field | type | scope | notes |
|---|---|---|---|
| title | string (1–255) | write_products | |
| body_html | string | write_products | sanitized |
| status | active, draft, archived | write_products | |
| tags | string[] | write_products | replaces all tags |
| media | {media_id, position}[] | write_products | upload first via staged uploads |
| variants[].id | gid | — | required to address a variant |
| variants[].price | string | write_products | two decimals |
| variants[].compare_at_price | string or null | write_products | |
| variants[].inventory_quantity | integer | write_inventory | single-location stores only |
| variants[].inventory_levels | {location_id, available}[] | write_inventory | multi-location stores |

Example:

```json
{"product": {"title": "北欧布艺沙发 L", "variants": [{"id": "gid://lumen/ProductVariant/55", "inventory_levels":
  [{"location_id": "gid://lumen/Location/1201", "available": 12}]}]}}
```

A PATCH is one request for rate limiting whatever its size. Responses return the full updated product.
Concurrency: send `If-Unmodified-Since` with the product's `updated_at` to avoid overwriting concurrent edits;
a conflict returns `412`.
"""


def staged_upload(rng: random.Random) -> str:
    return api_response(rng, 201, "Created", {"Date": "Mon, 22 Jun 2026 04:40:17 GMT", "Content-Type": "application/json",
                                      "X-Request-Id": hex_id(rng, 24)},
                     json_text({"staged_upload": {"url": f"https://uploads.lumencommerce.example/{hex_id(rng, 32)}",
                                                  "method": "PUT", "headers": {"Content-Type": "image/jpeg",
                                                                               "x-amz-acl": "private"},
                                                  "resource_url": f"https://uploads.lumencommerce.example/tmp/"
                                                                  f"{hex_id(rng, 16)}/YQ-SF-1042-1.jpg",
                                                  "expires_at": "2026-06-22T05:40:17Z",
                                                  "next": "POST /v2/media with resource_url to get a media_id"}}))


def dry_run(rng: random.Random) -> str:
    lines = []
    for moment in moments(rng, datetime(2026, 6, 22, 4, 44), 50, 0.2, 1.5):
        lines.append(f"{iso(moment)} INFO  sync[dry-run]: would PATCH /v2/products/{rng.randint(10**11, 10**12)} "
                     f"fields={rng.choice(['inventory_levels', 'inventory_levels', 'title', 'title,inventory_levels'])}"
                     f" sku=YQ-{rng.choice(['SF', 'TB', 'CH', 'LP'])}-{rng.randint(1000, 9999)}")
    lines.append("INFO  sync[dry-run]: 1,187 products would change (inventory 962, title 131, both 94); 0 errors")
    return "\n".join(lines)


def sync_source() -> str:
    return '''     1	"""Apply ERP changes to the store."""
     2	import logging
     3	
     4	from catalog_sync.erp import read_export
     5	
     6	log = logging.getLogger("sync")
     7	
     8	
     9	def changes_for(row, product, variant):
    10	    """Fields that differ between the ERP row and the store (v1 shape)."""
    11	    changes = {}
    12	    if row.title != product["title"]:
    13	        changes["title"] = row.title
    14	    if row.inventory != variant["inventory_quantity"]:
    15	        changes.setdefault("variants", [{"id": variant["id"]}])[0]["inventory_quantity"] = row.inventory
    16	    if row.price != variant["price"]:
    17	        changes.setdefault("variants", [{"id": variant["id"]}])[0]["price"] = row.price
    18	    if row.images != [image["src"] for image in product.get("images", [])]:
    19	        changes["images"] = [{"src": url} for url in row.images]
    20	    return changes
    21	
    22	
    23	def run(client, export_path, dry_run=False):
    24	    erp = {row.sku: row for row in read_export(export_path)}
    25	    updated = 0
    26	    for product in client.products():
    27	        for variant in product["variants"]:
    28	            row = erp.get(variant["sku"])
    29	            if row is None:
    30	                continue
    31	            changes = changes_for(row, product, variant)
    32	            if changes and not dry_run:
    33	                client.put(product["id"], changes)
    34	                updated += 1
    35	    log.info("updated %d products", updated)
    36	    return updated
'''


SYNC_CODE = '''"""Apply ERP changes to the store (API v2): one PATCH per product, only changed fields.

Prices are not synced: they follow the ERP's own repricing workflow (see README)."""
from __future__ import annotations

import logging
from typing import Any

from catalog_sync.erp import read_export
from catalog_sync.lumen_v2 import LumenV2
from catalog_sync.media import ensure_media

log = logging.getLogger("sync")
SYNCED_FIELDS = ("title", "inventory", "images")


def changes_for(row: Any, product: dict[str, Any], variant: dict[str, Any], location_id: str) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    if row.title != product["title"]:
        changes["title"] = row.title
    levels = {level["location_id"]: level["available"] for level in variant.get("inventory_levels", [])}
    if levels.get(location_id) != row.inventory:
        changes["variants"] = [{"id": variant["id"],
                                "inventory_levels": [{"location_id": location_id, "available": row.inventory}]}]
    current = [media["src"] for media in product.get("media", [])]
    if row.images and row.images != current:
        changes["media"] = row.images  # replaced by media ids in run()
    return changes


def run(client: LumenV2, export_path: str, location_id: str, dry_run: bool = False) -> dict[str, int]:
    erp = {row.sku: row for row in read_export(export_path)}
    counts = {"updated": 0, "unchanged": 0, "not_in_erp": 0, "conflicts": 0}
    for product in client.products():
        variant = product["variants"][0]
        row = erp.get(variant["sku"])
        if row is None:
            counts["not_in_erp"] += 1
            continue
        changes = changes_for(row, product, variant, location_id)
        if not changes:
            counts["unchanged"] += 1
            continue
        if "media" in changes:
            changes["media"] = [{"media_id": ensure_media(client, url), "position": n}
                                for n, url in enumerate(changes["media"], 1)]
        if dry_run:
            log.info("would PATCH %s fields=%s", product["id"], ",".join(changes))
            continue
        try:
            client.patch_product(product["id"], changes, unmodified_since=product["updated_at"])
            counts["updated"] += 1
        except client.Conflict:
            counts["conflicts"] += 1
            log.warning("412 conflict on %s, retried next run", product["id"])
    log.info("sync done: %s", counts)
    return counts
'''


def all_tests(rng: random.Random) -> str:
    names = [f"tests/test_{m}.py::test_{n}" for m, tests in (
        ("erp", ["read_export", "skips_blank_sku", "diff_title", "diff_inventory", "gbk_encoding"]),
        ("lumen_v2", ["products_follow_the_cursor", "patch_sends_only_changes", "429_waits_for_retry_after",
                      "patch_sends_unmodified_since"]),
        ("pull", ["resumes_after_410", "resume_skips_seen_ids", "backoff_capped_at_60s"]),
        ("sync", ["title_change_is_patched", "inventory_uses_location_levels", "price_is_never_sent",
                  "media_uploaded_before_patch", "conflict_counted_not_raised", "dry_run_sends_nothing"]),
        ("webhooks", ["bad_signature_is_401", "missing_secret_is_503", "duplicate_delivery_is_ignored"]))
        for n in tests]
    return (pytest_lines(rng, names, set()) + f"\n\n============================== {len(names)} passed in "
            f"{rng.uniform(1.5, 3.0):.2f}s ==============================")


def staging_sync(rng: random.Random) -> str:
    lines = []
    for moment in moments(rng, datetime(2026, 6, 22, 5, 10), 60, 0.2, 0.6):
        lines.append(f"{iso(moment)} INFO  sync: PATCH /v2/products/{rng.randint(10**11, 10**12)} "
                     f"fields={rng.choice(['variants', 'variants', 'title', 'title,variants', 'media'])} status=200 "
                     f"bucket={rng.randint(1, 39)}/40 {rng.randint(90, 600)}ms")
    lines.append(f"{iso(moment)} WARN  sync: 412 conflict on gid://lumen/Product/{rng.randint(10**11, 10**12)}, "
                 "retried next run")
    lines.append("INFO  sync: sync done: {'updated': 1186, 'unchanged': 3127, 'not_in_erp': 4, 'conflicts': 1}")
    return "\n".join(lines)


def staging_compare(rng: random.Random) -> str:
    return ("INFO compare: store yunqi-home-staging, fields title,inventory,price\n"
            "INFO compare: title     matches 4,313 / 4,314\n"
            "INFO compare: inventory matches 4,313 / 4,314\n"
            "INFO compare: price     store == previous store value for 4,314 / 4,314 (ERP differs on 212: "
            "not synced by design)\n"
            f"INFO compare: 1 mismatch: YQ-CH-{rng.randint(1000, 9999)} (the 412 conflict; next run)\n" +
            "\n".join(f"  sample YQ-{rng.choice(['SF', 'TB', 'LP'])}-{rng.randint(1000, 9999)}: title ok, "
                      f"inventory {rng.randint(0, 300)} ok, price unchanged" for _ in range(12)))


def count_check(rng: random.Random) -> str:
    return f"{TOTAL}\n1186"


README_TEXT = """# catalog-sync

Nightly sync of titles, inventory and images from the ERP export to the Lumen Commerce store (API v2).

## Run

    python -m catalog_sync.sync --store yunqi-home-staging --dry-run
    python -m catalog_sync.sync --store yunqi-home

## Notes on API v2

- Cursor pagination (`page_info`, 10-minute validity; pull resumes from the last `updated_at` on 410).
- One PATCH per product; 40 requests per 10 s per store.
- Prices are not synced (ERP repricing workflow owns them).
- Webhooks need LUMEN_WEBHOOK_SECRET; without it the receiver answers 503 and Lumen retries.
"""


def git_status(rng: random.Random) -> str:
    return (" M README.md\n M catalog_sync/pull.py\n M catalog_sync/sync.py\n M catalog_sync/webhooks.py\n"
            "?? catalog_sync/lumen_v2.py\n?? catalog_sync/media.py\n?? tests/test_lumen_v2.py\n?? tests/test_pull.py\n"
            "?? tests/test_sync.py\n README.md                | 24 +++++----\n catalog_sync/pull.py     | 31 +++++---\n"
            " catalog_sync/sync.py     | 88 +++++++++++---------\n catalog_sync/webhooks.py | 61 ++++++++++++\n"
            " 4 files changed, 151 insertions(+), 53 deletions(-)")


def build() -> Scenario:
    rng = random.Random(SEED)
    run = RunBuilder.opened(TRACE_ID, TOOLS, SYSTEM, TASK)
    run.act("先看一下仓库结构和现有的同步脚本。", Call("run", {"cmd": "ls -R | head -40 && cat sync_products.py"},
                                                repo_and_script()))
    run.act("读一下 v2 的迁移文档。", Call("read_file", {"path": "docs/lumen-v2-migration.md"}, migration_doc()))
    run.act("先看一下现在的 v1 客户端和 ERP 解析，改的时候要保持行为一致。",
            Call("read_file", {"path": "catalog_sync/lumen_v1.py"}, v1_client_source()))
    run.act("", Call("read_file", {"path": "catalog_sync/erp.py"}, erp_source()))
    run.act("文档说批量接口要看套餐。先确认一下店铺信息和套餐。",
            Call("http_request", {"method": "GET", "url": f"{API}/v2/shop"}, shop_info(rng)))
    run.act("店铺是 Growth 套餐。试一下 v2 的商品列表，看分页格式。",
            Call("http_request", {"method": "GET", "url": f"{API}/v2/products", "params": {"limit": 250}},
                 page(rng, 24, token_id(rng, 48))))
    run.act("v2 用 Link 头里的 page_info 游标翻页，不再有 offset。查一下商品总数。",
            Call("http_request", {"method": "GET", "url": f"{API}/v2/products/count"}, count_output(rng),
                 labels=("total",)))
    run.act(f"v2 商品总数 {TOTAL:,} 个，limit 最大 250，需要 18 页。取第二页确认游标可用。",
            Call("http_request", {"method": "GET", "url": f"{API}/v2/products",
                                  "params": {"limit": 250, "page_info": token_id(rng, 48)}},
                 page(rng, 24, token_id(rng, 48))), labels=("total",))
    run.user("麻烦这次同步先别动价格字段，价格还是以 ERP 那边的调价流程为准，谢谢！", labels=("price",))
    run.act("好的，这次同步不改价格字段。先试一下批量更新接口，拿两个商品做测试。",
            Call("http_request", {"method": "POST", "url": f"{API}/v2/products/bulk",
                                  "body": {"operations": [{"id": "gid://lumen/Product/100000000001",
                                                           "title": "北欧布艺沙发 L"},
                                                          {"id": "gid://lumen/Product/100000000002",
                                                           "inventory_quantity": 12}]}},
                 bulk_forbidden(rng), labels=("bulk",)), labels=("price",))
    run.act("批量接口只对 Enterprise 版开放（403 plan_required），我们是 Growth 版，用不了。决定：改用逐条 PATCH "
            "/v2/products/{id}，按 40 次/10 秒的限流控制速率。先用一个商品试 PATCH。",
            Call("http_request", {"method": "PATCH", "url": f"{API}/v2/products/100000000001",
                                  "body": {"title": "北欧布艺沙发 L"}}, scope_missing(rng)),
            labels=("bulk", "per_item"))
    run.act("PATCH 需要 write_products 权限，现在的 token 只有 read_products。提交权限申请。",
            Call("http_request", {"method": "POST", "url": f"{API}/v2/oauth/scope_requests",
                                  "body": {"scopes": ["write_products", "write_inventory"],
                                           "reason": "catalog-sync v2 migration (per-item updates)"}},
                 scope_requested(rng), labels=("scope",)))
    run.act("权限申请已提交，等店主审批。这段时间先改代码，先跑一下现有测试。",
            Call("run", {"cmd": "python -m pytest -q 2>&1 | tail -40"}, old_tests(rng)), labels=("scope",))
    run.user("另外，正式切换前请先在 staging 店铺跑一遍。", labels=("staging",))
    run.act("明白，先在 staging 店铺验证。写 v2 客户端：游标分页和逐条更新。",
            Call("write_file", {"path": "catalog_sync/lumen_v2.py", "content": CLIENT_V1},
                 written("catalog_sync/lumen_v2.py", CLIENT_V1) + lint_output(rng)), labels=("staging",))
    run.act("写测试。", Call("write_file", {"path": "tests/test_lumen_v2.py", "content": CLIENT_TESTS},
                            written("tests/test_lumen_v2.py", CLIENT_TESTS) + lint_output(rng)))
    run.act("跑新测试。", Call("run", {"cmd": "python -m pytest tests/test_lumen_v2.py -q 2>&1 | tail -60"},
                              client_test_failure(rng)))
    run.act("Link 头解析有问题：rel 参数带引号，正则没处理。修一下。",
            Call("run", {"cmd": "python - <<'EOF'\nfrom pathlib import Path\np = Path('catalog_sync/lumen_v2.py')\n"
                                "s = p.read_text().replace(\"rel=next\", 'rel=\"?next\"?')\np.write_text(s)\nEOF\n"
                                "python -m pytest tests/test_lumen_v2.py -q 2>&1 | tail -30"},
                 client_test_pass(rng)))
    run.act("客户端测试通过。对一下 ERP 导出和 v2 的 SKU。",
            Call("run", {"cmd": "python scripts/compare_skus.py --erp exports/erp_skus_0621.csv --store "
                                "yunqi-home 2>&1 | tail -60"}, sku_compare(rng)))
    run.act("有 37 个 SKU 在 v2 里查不到。看看是不是被归档了。",
            Call("http_request", {"method": "GET", "url": f"{API}/v2/products",
                                  "params": {"status": "archived", "limit": 250}}, archived(rng)),
            labels=("pending",))
    run.act("归档列表里只找到其中 9 个。待办：(1) 37 个 SKU 在 v2 里查不到（9 个已归档，其余 28 个原因不明），需要运营确认；"
            "(2) webhook 签名密钥还没有，等运维提供后才能验签。先看 webhook 的文档。",
            Call("read_file", {"path": "docs/lumen-v2-webhooks.md"}, webhook_doc()), labels=("pending",))
    run.act("看一下 staging 店铺现在注册了哪些 webhook。",
            Call("http_request", {"method": "GET", "url": f"{API}/v2/webhooks", "params": {"store":
                                                                                         "yunqi-home-staging"}},
                 webhook_list(rng)))
    run.act("webhook 用 HMAC-SHA256 验签，密钥在应用后台生成。先把处理函数写好，密钥从环境变量读。",
            Call("write_file", {"path": "catalog_sync/webhooks.py", "content": WEBHOOK_CODE},
                 written("catalog_sync/webhooks.py", WEBHOOK_CODE) + lint_output(rng)))
    run.act("跑一下 webhook 的测试。", Call("run", {"cmd": "python -m pytest tests/test_webhooks.py -q 2>&1 | tail -40"},
                                      webhook_tests(rng)))
    run.act("在 staging 店铺注册 v2 的 webhook（签名要等密钥，先注册）。",
            *[Call("http_request", {"method": "POST", "url": f"{API}/v2/webhooks",
                                    "params": {"store": "yunqi-home-staging"},
                                    "body": {"topic": topic, "address": "https://hooks.yunqi.example/lumen/v2",
                                             "format": "json"}}, webhook_created(rng, topic))
              for topic in ("products/update", "products/delete", "inventory_levels/update")])
    run.act("在 staging 店铺上先做一次只读的全量拉取，测分页。",
            Call("run", {"cmd": "python -m catalog_sync.pull --store yunqi-home-staging --out /tmp/staging.jsonl "
                                "2>&1 | tail -60"}, staging_pull(rng), labels=("total",)))
    run.act("第 11 页的游标过期了（410 cursor_expired）：两页之间停了 12 分钟（限流退避太久）。看一下文档对游标有效期的说明。",
            Call("run", {"cmd": "grep -n -i -A3 'cursor' docs/lumen-v2-migration.md | head -40"}, cursor_doc()))
    run.act("游标只有 10 分钟有效期。改成遇到 410 就从最后一个 updated_at 重新开始取，并把退避上限降到 60 秒。",
            Call("run", {"cmd": "python - <<'EOF'\n# patch pull.py: resume from last updated_at on 410\nEOF\n"
                                "git diff --stat && python -m pytest -q 2>&1 | tail -20"}, resume_patch(rng)))
    run.act("再在 staging 上全量拉一次。", Call("run", {"cmd": "python -m catalog_sync.pull --store yunqi-home-staging "
                                                           "--out /tmp/staging.jsonl 2>&1 | tail -40"},
                                                staging_pull_ok(rng), labels=("total",)))
    run.act("staging 拉取完整。看一下 ERP 导出的字段，准备写更新逻辑。",
            Call("run", {"cmd": "head -30 exports/erp_skus_0621.csv && wc -l exports/erp_skus_0621.csv"},
                 erp_head(rng)))
    run.act("ERP 导出有标题、库存、价格、图片。对比一下 v1 时期的更新日志，看哪些字段常变。",
            Call("run", {"cmd": "tail -50 logs/sync-v1-2026-06-20.log"}, v1_log(rng)))
    run.act("看一下 v2 的 PATCH 文档里可更新的字段。",
            Call("read_file", {"path": "docs/lumen-v2-products-patch.md"}, patch_doc()))
    run.act("图片要先上传拿到 media id 再关联。试一下 staging 的图片上传接口。",
            Call("http_request", {"method": "POST", "url": f"{API}/v2/media/staged_uploads",
                                  "params": {"store": "yunqi-home-staging"},
                                  "body": {"filename": "YQ-SF-1042-1.jpg", "mime_type": "image/jpeg",
                                           "file_size": 482113}}, staged_upload(rng)))
    run.act("多仓库存要用 inventory_levels，需要仓库的 location id。",
            Call("http_request", {"method": "GET", "url": f"{API}/v2/locations", "params": {"store":
                                                                                          "yunqi-home-staging"}},
                 locations(rng)))
    run.act("ERP 的库存对应杭州仓。看一下 staging 店铺的数据和生产是否同步过（取一页）。",
            Call("http_request", {"method": "GET", "url": f"{API}/v2/products",
                                  "params": {"store": "yunqi-home-staging", "limit": 250}},
                 page(rng, 24, token_id(rng, 48))))
    run.act("staging 数据和生产一致，图片流程也可用。在 staging 上跑一遍只改标题和库存的 dry-run。",
            Call("run", {"cmd": "python -m catalog_sync.sync --store yunqi-home-staging --fields title,inventory "
                                "--dry-run 2>&1 | tail -50"}, dry_run(rng)))
    run.probe("scope-approval", "approval", "The scope request id came only from the OAuth endpoint; checking it "
              "needs the id.", ["scope"], contains=[SCOPE_REQUEST])
    run.act("dry-run 正常。查一下权限申请有没有批下来。",
            Call("http_request", {"method": "GET", "url": f"{API}/v2/oauth/scope_requests/{SCOPE_REQUEST}"},
                 scope_approved(rng)))
    run.act("权限已批准。看一下 token 现在的权限。",
            Call("http_request", {"method": "GET", "url": f"{API}/v2/oauth/access_scopes"}, access_scopes(rng)))
    run.act("有 write_products 了。看看 sync.py 现在的更新部分。",
            Call("run", {"cmd": "sed -n 1,80p catalog_sync/sync.py"}, sync_source()))
    run.probes(
        ("no-price", "constraint", "The user asked politely, in Chinese, to leave prices alone; this turn writes "
         "the update payload.", ["price"], ["别动价格"], []),
        ("per-item", "decision", "The agent decided on per-item PATCH after the bulk endpoint failed.",
         ["per_item"], ["逐条 PATCH"], []),
        ("bulk-enterprise", "failure", "The bulk endpoint is Enterprise-only (403); the update loop must not "
         "use it.", ["bulk"], ["Enterprise plan", "只对 Enterprise"], []))
    run.act("写更新逻辑：逐条 PATCH，价格字段不发，库存和标题、图片按 ERP 更新。",
            Call("write_file", {"path": "catalog_sync/sync.py", "content": SYNC_CODE},
                 written("catalog_sync/sync.py", SYNC_CODE) + lint_output(rng)))
    run.act("跑全部测试。", Call("run", {"cmd": "python -m pytest -q 2>&1 | tail -40"}, all_tests(rng)))
    run.act("在 staging 店铺上正式跑一遍同步。",
            Call("run", {"cmd": "python -m catalog_sync.sync --store yunqi-home-staging 2>&1 | tail -60"},
                 staging_sync(rng)))
    run.user("太好了！那条 412 冲突是什么情况？")
    run.act("412 表示我们读取之后，这个商品在后台被人改过（If-Unmodified-Since 不匹配），同步跳过它，下次运行会重新读取再更新。"
            "看一下 API 用量，确认限流余量。",
            Call("http_request", {"method": "GET", "url": f"{API}/v2/shop/api_usage",
                                  "params": {"store": "yunqi-home-staging", "window": "1h"}}, api_usage(rng)))
    run.act("用量正常。再跑一次同步，把那条冲突补上。",
            Call("run", {"cmd": "python -m catalog_sync.sync --store yunqi-home-staging 2>&1 | tail -30"},
                 staging_resync(rng)))
    run.act("staging 同步完成，抽查几个商品。",
            Call("http_request", {"method": "GET", "url": f"{API}/v2/products",
                                  "params": {"store": "yunqi-home-staging", "limit": 5,
                                             "updated_at_min": "2026-06-22T05:00:00Z"}},
                 page(rng, 5, None)))
    run.act("抽查结果和 ERP 一致，价格未变。",
            Call("run", {"cmd": "python scripts/compare_skus.py --erp exports/erp_skus_0621.csv --store "
                                "yunqi-home-staging --fields title,inventory,price 2>&1 | tail -40"},
                 staging_compare(rng)))
    run.probe("total-products", "fact", "The product count from v2 was read early; the full-run check compares "
              "against it.", ["total"], matches=[r"\b4,?318\b"])
    run.act("对比通过。确认 staging 同步的商品数量和生产店铺的总数一致。",
            Call("run", {"cmd": "jq -s 'length' /tmp/staging.jsonl && grep -c '\"status\": \"updated\"' "
                                "logs/sync-v2-staging.log"}, count_check(rng)))
    run.act("数量对得上。更新 README 的迁移说明。",
            Call("write_file", {"path": "README.md", "content": README_TEXT}, written("README.md", README_TEXT)))
    run.act("看一下 pull.py 的改动。", Call("run", {"cmd": "git diff catalog_sync/pull.py"}, pull_diff()))
    run.act("看一下完整的改动。", Call("run", {"cmd": "git status --short && git diff --stat"}, git_status(rng)))
    run.probes(
        ("missing-skus", "pending", "An open item: 37 SKUs not found in v2, waiting for operations.",
         ["pending"], ["37 个 SKU"], []),
        ("webhook-secret", "pending", "An open item: the webhook signing secret from ops.", ["pending"],
         ["webhook 签名密钥"], []),
        ("staging-first", "constraint", "The user asked to run on the staging store before switching.",
         ["staging"], ["先在 staging 店铺"], []))
    run.say("迁移完成情况：\n1. v2 客户端（游标分页、游标过期自动续拉、逐条 PATCH、限流 40 次/10 秒）和 webhook 处理已写好，"
            "测试全部通过。\n2. 已按要求先在 staging 店铺跑通：4,318 个商品拉取完整，标题/库存/图片更新成功，价格字段未改动。\n"
            "3. 待办：37 个 SKU 在 v2 查不到（9 个已归档），需要运营确认；webhook 签名密钥等运维提供。\n"
            "确认后我就切到生产店铺 yunqi-home。")
    return run.finish()
