"""Scenario 3: an ops incident with a subtask switch.

Log analysis and metrics tables find a connection-pool typo in a deploy; a rollback proves impossible
(revisionHistoryLimit 0); a standard change is approved by a tool whose id only that output holds; a partner API
teaches its rate limit (100 requests per minute) through headers and 429s; the user asks (in Chinese) for UTC
times in status updates and, politely, to leave hazmat lanes out; mid-batch the user switches to rotating the
staging API key, then back to "lanes 121–240".
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from .builder import Call, RunBuilder, Scenario, tool
from .noise import edge_headers, frame_text, hex_id, http_text, iso, json_text, moments, token_id

SEED = 7731
TRACE_ID = "scenario-ops-incident-lanes"
PARTNER = "https://partner-api.oceanix.example/v3"
NEW_KEY = "stg_k_9f2c71e0"
OLD_KEY = "stg_k_41d0b7a3"

TOOLS = [
    tool("query_logs", "Search service logs (Loki). Returns matching lines, newest last.",
         {"service": "service name", "since": "RFC 3339 time", "until": "RFC 3339 time", "query": "LogQL filter",
          "limit": {"type": "integer"}}, optional=("until", "limit")),
    tool("query_metrics", "Run a PromQL range query; returns a table.",
         {"promql": "PromQL", "start": "RFC 3339", "end": "RFC 3339", "step": "e.g. 5m"}),
    tool("kubectl", "Run kubectl against the production or staging cluster.", {"args": "arguments"}),
    tool("http_request", "Make an HTTP request; returns status line, headers and body.",
         {"method": "GET|POST|PUT|PATCH|DELETE", "url": "URL", "headers": {"type": "object"},
          "body": {"type": "object"}}, optional=("headers", "body")),
    tool("lane_inventory", "List pricing lanes with their cargo class and publish state.",
         {"from_lane": {"type": "integer"}, "to_lane": {"type": "integer"}}),
    tool("replay_lanes", "Re-publish a range of lanes to the partner API (one request per lane).",
         {"from_lane": {"type": "integer"}, "to_lane": {"type": "integer"},
          "exclude_classes": {"type": "array", "items": {"type": "string"}}, "max_per_minute": {"type": "integer"},
          "only_lanes": {"type": "array", "items": {"type": "integer"}}, "dry_run": {"type": "boolean"},
          "headers": {"type": "object"}},
         optional=("exclude_classes", "max_per_minute", "only_lanes", "dry_run", "headers")),
    tool("secrets", "Manage API keys in the secrets vault.", {"action": "list|rotate|update|revoke|audit",
                                                              "name": "secret name", "environment": "env",
                                                              "scopes": {"type": "array", "items": {"type": "string"}}},
         optional=("scopes",)),
    tool("change_request", "Create or read a change request in the change-management system.",
         {"action": "create|get", "summary": "what changes", "risk": "low|medium|high", "id": "change id"},
         optional=("summary", "risk", "id")),
    tool("post_status", "Post a message to a Slack channel.", {"channel": "#channel", "text": "message"}),
]

SYSTEM = """You are the on-call SRE agent for Oceanix's pricing platform. You can read logs and metrics, run
kubectl, call HTTP APIs, manage secrets, file change requests and post to Slack. Production changes go through a
change request. Explain what you find and what you do; keep the incident channel informed."""

TASK = """INC-7731: since the 03:10 UTC deploy of lanefeed v2.15.0, rate publishing to the partner has been failing
for lanes 1–480. Please find the cause and fix it, then re-publish lanes 1–480 to the partner API
(POST https://partner-api.oceanix.example/v3/lanes/{id}/republish, via replay_lanes). Post progress in #inc-7731."""

CLASSES = ["GEN"] * 14 + ["RF"] * 4 + ["HZ"] + ["OOG"]


def lanes(rng: random.Random) -> list[dict[str, object]]:
    ports = ["CNSHA", "CNNGB", "CNYTN", "SGSIN", "KRPUS", "NLRTM", "DEHAM", "BEANR", "USLAX", "USNYC", "GBFXT",
             "ESVLC", "ITGOA", "AEJEA", "INNSA", "BRSSZ", "JPTYO", "VNSGN", "MYPKG", "AUMEL"]
    carriers = ["MSCU", "MAEU", "CMDU", "COSU", "HLCU", "ONEY", "EGLV", "YMLU", "ZIMU"]
    rows = []
    for lane in range(1, 481):
        origin, destination = rng.sample(ports, 2)
        rows.append({"lane": lane, "origin": origin, "destination": destination, "carrier": rng.choice(carriers),
                     "class": rng.choice(CLASSES), "last_ok": f"2026-05-12T0{rng.randint(0, 2)}:{rng.randint(10, 59)}Z",
                     "state": "stale"})
    return rows


def hazardous(table: list[dict[str, object]], first: int, last: int) -> list[int]:
    return [int(row["lane"]) for row in table[first - 1:last] if row["class"] == "HZ"]  # type: ignore[arg-type]


def error_logs(rng: random.Random) -> str:
    pods = [f"lanefeed-7d9c{hex_id(rng, 4)}-{token_id(rng, 5).lower()}" for _ in range(4)]
    lines = []
    for moment in moments(rng, datetime(2026, 5, 12, 3, 11), 30, 4, 40):
        pod = rng.choice(pods)
        kind = rng.random()
        if kind < 0.55:
            lines.append(f"{iso(moment)} ERROR [{pod}] c.o.l.publish.RatePublisher - publish failed lane="
                         f"{rng.randint(1, 480)} attempt={rng.randint(1, 3)}: org.springframework.jdbc."
                         "CannotGetJdbcConnectionException: Failed to obtain JDBC Connection; nested exception is "
                         "java.sql.SQLTransientConnectionException: HikariPool-1 - Connection is not available, "
                         "request timed out after 30000ms.")
        elif kind < 0.75:
            lines.append(f"{iso(moment)} WARN  [{pod}] com.zaxxer.hikari.pool.HikariPool - HikariPool-1 - Pool stats "
                         f"(total=4, active=4, idle=0, waiting={rng.randint(18, 96)})")
        elif kind < 0.9:
            lines.append(f"{iso(moment)} INFO  [{pod}] c.o.l.http.AccessLog - POST /internal/lanes/"
                         f"{rng.randint(1, 480)}/price 503 {rng.randint(30000, 30120)}ms")
        else:
            lines.append(f"{iso(moment)} ERROR [{pod}] c.o.l.publish.RatePublisher - batch aborted after "
                         f"{rng.randint(3, 9)} consecutive failures")
    trace = """java.sql.SQLTransientConnectionException: HikariPool-1 - Connection is not available, request timed out after 30000ms.
	at com.zaxxer.hikari.pool.HikariPool.createTimeoutException(HikariPool.java:696)
	at com.zaxxer.hikari.pool.HikariPool.getConnection(HikariPool.java:197)
	at com.zaxxer.hikari.pool.HikariPool.getConnection(HikariPool.java:162)
	at com.zaxxer.hikari.HikariDataSource.getConnection(HikariDataSource.java:128)
	at org.springframework.jdbc.datasource.DataSourceUtils.fetchConnection(DataSourceUtils.java:160)
	at org.springframework.jdbc.datasource.DataSourceUtils.doGetConnection(DataSourceUtils.java:118)
	at org.springframework.jdbc.core.JdbcTemplate.execute(JdbcTemplate.java:376)
	at com.oceanix.lanefeed.store.RateStore.latestRates(RateStore.java:88)
	at com.oceanix.lanefeed.publish.RatePublisher.publishLane(RatePublisher.java:142)
	at com.oceanix.lanefeed.publish.RatePublisher.lambda$publishBatch$3(RatePublisher.java:117)
	at java.base/java.util.concurrent.CompletableFuture$AsyncSupply.run(CompletableFuture.java:1768)
	at java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1136)
	at java.base/java.lang.Thread.run(Thread.java:840)"""
    return "\n".join(lines[:12]) + "\n" + trace + "\n" + "\n".join(lines[12:]) + \
        f"\n-- {len(lines) + 13} lines, query took {rng.randint(180, 900)}ms, 1 stream per pod (4 pods)"


def metrics_table(rng: random.Random, start: datetime, points: int, broken_until: int) -> str:
    rows, index = [], []
    for n in range(points):
        moment = start + timedelta(minutes=5 * n)
        broken = n < broken_until
        index.append(moment.strftime("%H:%M"))
        rows.append([round(rng.uniform(0.31, 0.62) if broken else rng.uniform(0.0, 0.01), 3),
                     rng.randint(29000, 30200) if broken else rng.randint(140, 230),
                     rng.randint(160, 240) if broken else rng.randint(150, 230),
                     4 if broken else rng.randint(9, 22), rng.randint(30, 97) if broken else 0,
                     round(rng.uniform(0.2, 0.4) if broken else rng.uniform(0.5, 0.7), 2)])
    return ("# sum by () (rate(lanefeed_publish_errors_total[5m])) / sum(rate(lanefeed_publish_total[5m])), "
            "histogram_quantile(0.99, ...), hikari_connections_*; step 5m\n"
            + frame_text(["err_ratio", "p99_ms", "rps", "pool_active", "pool_waiting", "cpu_cores"], rows, index))


def deployment_yaml(rng: random.Random) -> str:
    return f"""apiVersion: apps/v1
kind: Deployment
metadata:
  annotations:
    deployment.kubernetes.io/revision: "31"
    meta.helm.sh/release-name: lanefeed
    meta.helm.sh/release-namespace: pricing
  creationTimestamp: "2025-08-19T09:12:40Z"
  generation: 57
  labels:
    app.kubernetes.io/name: lanefeed
    app.kubernetes.io/version: v2.15.0
    team: pricing-platform
  name: lanefeed
  namespace: pricing
  resourceVersion: "{rng.randint(10**8, 10**9)}"
  uid: {hex_id(rng, 8)}-{hex_id(rng, 4)}-{hex_id(rng, 4)}-{hex_id(rng, 4)}-{hex_id(rng, 12)}
spec:
  progressDeadlineSeconds: 600
  replicas: 4
  revisionHistoryLimit: 0
  selector:
    matchLabels:
      app.kubernetes.io/name: lanefeed
  strategy:
    rollingUpdate:
      maxSurge: 25%
      maxUnavailable: 0
    type: RollingUpdate
  template:
    metadata:
      annotations:
        prometheus.io/port: "9102"
        prometheus.io/scrape: "true"
      labels:
        app.kubernetes.io/name: lanefeed
    spec:
      containers:
      - env:
        - name: SPRING_PROFILES_ACTIVE
          value: prod
        - name: DB_URL
          valueFrom:
            secretKeyRef:
              key: url
              name: lanefeed-db
        - name: DB_POOL_MAX
          value: "4"
        - name: DB_POOL_MIN_IDLE
          value: "2"
        - name: PUBLISH_CONCURRENCY
          value: "64"
        - name: PARTNER_API_BASE
          value: {PARTNER}
        - name: PARTNER_API_KEY
          valueFrom:
            secretKeyRef:
              key: api-key
              name: partner-api
        image: registry.oceanix.example/pricing/lanefeed:v2.15.0
        imagePullPolicy: IfNotPresent
        livenessProbe:
          httpGet:
            path: /actuator/health/liveness
            port: 8080
          periodSeconds: 10
        name: lanefeed
        ports:
        - containerPort: 8080
          name: http
        - containerPort: 9102
          name: metrics
        readinessProbe:
          httpGet:
            path: /actuator/health/readiness
            port: 8080
        resources:
          limits:
            memory: 2Gi
          requests:
            cpu: 500m
            memory: 1536Mi
      terminationGracePeriodSeconds: 45
status:
  availableReplicas: 4
  observedGeneration: 57
  readyReplicas: 4
  replicas: 4
  updatedReplicas: 4
---
# helm diff (v2.14.3 -> v2.15.0), values.yaml
-  db:
-    poolMax: 40
+  db:
+    poolMax: 4      # PR #918 "tune pool for small envs"
+  publish:
+    concurrency: 64
   migrations:
+    - 0042_rates_partition_by_week.sql"""


def rollback_error(rng: random.Random) -> str:
    return (f"$ kubectl -n pricing rollout history deployment/lanefeed\ndeployment.apps/lanefeed\nREVISION  "
            f"CHANGE-CAUSE\n31        helm upgrade lanefeed v2.15.0 (ci job {rng.randint(40000, 49999)})\n\n"
            "$ kubectl -n pricing rollout undo deployment/lanefeed --dry-run=server\n"
            "error: no rollout history found for deployment \"lanefeed\"\n\n"
            "$ kubectl -n pricing get rs -l app.kubernetes.io/name=lanefeed\n"
            "NAME                   DESIRED   CURRENT   READY   AGE\n"
            f"lanefeed-7d9c{hex_id(rng, 6)}   4         4         4       {rng.randint(40, 59)}m\n\n"
            "# note: revisionHistoryLimit: 0 -> old ReplicaSets are deleted on every rollout\n"
            "$ helm -n pricing history lanefeed --max 5\n"
            "REVISION  UPDATED                   STATUS      CHART            APP VERSION  DESCRIPTION\n"
            "27        Thu May  7 14:02:11 2026  superseded  lanefeed-2.14.1  v2.14.1      Upgrade complete\n"
            "28        Fri May  8 09:40:57 2026  superseded  lanefeed-2.14.2  v2.14.2      Upgrade complete\n"
            "29        Mon May 11 16:18:03 2026  superseded  lanefeed-2.14.3  v2.14.3      Upgrade complete\n"
            "30        Tue May 12 03:09:44 2026  superseded  lanefeed-2.15.0  v2.15.0      Upgrade complete\n"
            "31        Tue May 12 03:10:12 2026  deployed    lanefeed-2.15.0  v2.15.0      Upgrade complete\n"
            "$ kubectl -n pricing exec deploy/lanefeed -- ./bin/migrate status | tail -5\n"
            " 0040_rates_currency_idx.sql          applied 2026-04-28\n"
            " 0041_lane_class_column.sql            applied 2026-05-07\n"
            " 0042_rates_partition_by_week.sql      applied 2026-05-12 03:10 (irreversible: data moved)\n")


def change_created(rng: random.Random) -> str:
    return json_text({"id": "CHG-2026-0519", "type": "standard", "template": "STD-117 config value change, "
                      "pre-approved", "state": "approved", "approval": {"mode": "pre-approved standard change",
                                                                       "approved_by": "CAB (standing approval)",
                                                                       "approved_at": "2026-05-12T04:02:13Z"},
                      "summary": "lanefeed: DB_POOL_MAX 4 -> 40 (hotfix for INC-7731)", "risk": "low",
                      "service": "lanefeed", "environment": "production", "incident": "INC-7731",
                      "window": {"start": "2026-05-12T04:00:00Z", "end": "2026-05-12T06:00:00Z"},
                      "implementer": "sre-agent", "checklist": [
                          {"item": "rollback plan documented", "done": True},
                          {"item": "monitoring dashboard linked", "done": True},
                          {"item": "customer impact assessed", "done": False}],
                      "links": {"self": f"https://change.oceanix.example/CHG-2026-0519",
                                "incident": "https://incident.oceanix.example/INC-7731"},
                      "audit": [{"at": "2026-05-12T04:02:11Z", "event": "created", "by": "sre-agent"},
                                {"at": "2026-05-12T04:02:13Z", "event": "auto-approved", "by": "policy STD-117"}],
                      "etag": hex_id(rng, 16)})


def rollout_output(rng: random.Random) -> str:
    lines = ["deployment.apps/lanefeed env updated"]
    for n in range(4):
        lines.append(f"Waiting for deployment \"lanefeed\" rollout to finish: {n} of 4 updated replicas are available...")
    lines.append("deployment \"lanefeed\" successfully rolled out")
    pods = "\n".join(f"lanefeed-5b8f{hex_id(rng, 6)}-{token_id(rng, 5).lower()}   1/1     Running   0          "
                     f"{rng.randint(20, 90)}s   10.42.{rng.randint(1, 9)}.{rng.randint(2, 250)}   ip-10-0-"
                     f"{rng.randint(1, 99)}-{rng.randint(1, 250)}.eu-west-1.compute.internal" for _ in range(4))
    events = "\n".join(f"{rng.randint(10, 90)}s  Normal  {reason}  pod/lanefeed-5b8f{hex_id(rng, 6)}  {message}"
                       for reason, message in (("Scheduled", "Successfully assigned pricing/lanefeed to node"),
                                               ("Pulled", "Container image already present on machine"),
                                               ("Created", "Created container lanefeed"),
                                               ("Started", "Started container lanefeed"),
                                               ("Killing", "Stopping container lanefeed"),
                                               ("SuccessfulDelete", "Deleted pod: lanefeed-7d9c (old replica set)")))
    return "\n".join(lines) + "\nNAME                              READY   STATUS    RESTARTS   AGE   IP   NODE\n" + \
        pods + "\n\nEVENTS\n" + events


def inventory(table: list[dict[str, object]], first: int, last: int) -> str:
    rows = [[r["origin"], r["destination"], r["carrier"], r["class"], str(r["last_ok"])[11:16]]
            for r in table[first - 1:last]]
    legend = ("# class: GEN general, RF reefer, HZ IMDG dangerous goods (manual desk may own these), OOG out of gauge"
              f"\n# {last - first + 1} lanes, all stale since 03:10Z; last_ok in UTC")
    return legend + "\n" + frame_text(["origin", "dest", "carrier", "class", "last_ok"], rows,
                                      index=[f"{int(r['lane']):04d}" for r in table[first - 1:last]])  # type: ignore


def replay_output(rng: random.Random, table: list[dict[str, object]], first: int, last: int, limit_hit: bool,
                  only: list[int] | None = None) -> tuple[str, list[int]]:
    """One line per lane; with limit_hit the 101st request in the minute and later ones get 429."""
    skipped = set(hazardous(table, first, last))
    wanted = only if only is not None else [n for n in range(first, last + 1) if n not in skipped]
    results, failed = [], []
    moment = datetime(2026, 5, 12, 4, 31) if limit_hit else datetime(2026, 5, 12, 4, 40)
    for count, lane in enumerate(wanted):
        moment += timedelta(milliseconds=rng.randint(180, 420) if limit_hit else rng.randint(620, 700))
        if limit_hit and count >= 100:
            results.append(f"{moment:%H:%M:%S} lane {lane:04d} 429 Too Many Requests retry_after=41")
            failed.append(lane)
        else:
            results.append(f"{moment:%H:%M:%S} lane {lane:04d} 202 Accepted job={hex_id(rng, 8)} "
                           f"{rng.randint(90, 400)}ms")
    summary = {"requested": len(wanted), "accepted": len(wanted) - len(failed), "failed": len(failed),
               "skipped_lanes": sorted(skipped) if only is None else [], "range": f"{first}-{last}"}
    sample = ""
    if failed:
        sample = "\n\nfirst failure, raw response:\n" + http_text(429, "Too Many Requests", {
            "Date": "Tue, 12 May 2026 04:32:07 GMT", "Content-Type": "application/problem+json",
            "X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1778560368",
            "Retry-After": "41", "X-Request-Id": hex_id(rng, 20), "Via": "1.1 partner-edge"},
            json_text({"type": "https://partner-api.oceanix.example/problems/rate-limited",
                       "title": "Too Many Requests", "status": 429,
                       "detail": "Quota exceeded for key stg_k… (prod pool): window 60s", "instance": "/v3/lanes/"
                       f"{failed[0]}/republish"}))
    return json_text(summary) + "\n" + "\n".join(results) + sample, failed


def rate_limit_doc(rng: random.Random) -> str:
    body = json_text({"key": "prod_k_…a81c", "plan": "partner-standard", "limits": [
        {"scope": "republish", "limit": 100, "window_seconds": 60, "burst": 0},
        {"scope": "read", "limit": 600, "window_seconds": 60, "burst": 50},
        {"scope": "bulk_export", "limit": 2, "window_seconds": 3600, "burst": 0}],
        "current": {"republish": {"used": 100, "resets_at": "2026-05-12T04:32:48Z"}},
        "docs": "https://partner-api.oceanix.example/docs/limits"})
    return http_text_edge(rng, 200, "OK", {"Date": "Tue, 12 May 2026 04:32:21 GMT", "Content-Type": "application/json",
                                 "X-RateLimit-Limit": "600", "X-RateLimit-Remaining": "597",
                                 "Cache-Control": "no-store", "X-Request-Id": hex_id(rng, 20)}, body)


def status_ack(rng: random.Random, channel: str) -> str:
    return json_text({"ok": True, "channel": channel, "ts": f"{rng.randint(1778550000, 1778570000)}."
                      f"{rng.randint(100000, 999999)}", "message": {"type": "message", "subtype": None,
                                                                     "bot_id": "B0" + token_id(rng, 9).upper(),
                                                                     "app_id": "A0" + token_id(rng, 9).upper(),
                                                                     "user": "U0" + token_id(rng, 9).upper(),
                                                                     "team": "T0" + token_id(rng, 9).upper(),
                                                                     "bot_profile": {
                                                                         "id": "B0" + token_id(rng, 9).upper(),
                                                                         "name": "sre-agent", "deleted": False,
                                                                         "icons": {size: "https://avatars.slack-edge"
                                                                                   f".example/{hex_id(rng, 12)}_{size}"
                                                                                   ".png" for size in ("image_36",
                                                                                                       "image_48",
                                                                                                       "image_72")}},
                                                                     "blocks": [{"type": "rich_text",
                                                                                 "block_id": token_id(rng, 5)}]},
                      "response_metadata": {"warnings": ["missing_charset"]},
                      "headers": {"x-slack-req-id": hex_id(rng, 32), "x-ratelimit-remaining": "49"}})


def key_list(rng: random.Random) -> str:
    keys = [{"id": OLD_KEY, "name": "partner-api-key", "environment": "staging", "created": "2025-11-03T10:21:00Z",
             "last_used": "2026-05-12T04:29:51Z", "scopes": ["lanes:read", "lanes:write"], "status": "active",
             "flags": ["found_in_public_paste (SEC-2291)"]}]
    for _ in range(13):
        keys.append({"id": f"{rng.choice(['stg', 'dev'])}_k_{hex_id(rng, 8)}", "name": rng.choice(
            ["grafana-api", "ci-deploy", "sentry-dsn", "partner-sandbox", "mapbox"]), "environment": "staging",
            "created": iso(datetime(2025, rng.randint(1, 12), rng.randint(1, 28), 9), millis=False),
            "last_used": iso(datetime(2026, 5, rng.randint(1, 12), rng.randint(0, 23)), millis=False),
            "scopes": rng.sample(["read", "write", "deploy", "lanes:read", "metrics:read"], 2), "status": "active",
            "flags": []})
    return json_text({"environment": "staging", "count": len(keys), "keys": keys})


def rotated(rng: random.Random) -> str:
    return json_text({"rotated": True, "name": "partner-api-key", "environment": "staging",
                      "new_key": {"id": NEW_KEY, "secret": "sk_stg_" + "•" * 24 + token_id(rng, 4),
                                  "created": "2026-05-12T04:47:31Z", "scopes": ["lanes:read"],
                                  "note": "scopes copied from template partner-read; adjust if needed"},
                      "old_key": {"id": OLD_KEY, "status": "active", "expires": "2026-05-13T04:47:31Z",
                                  "grace_period_hours": 24},
                      "vault_path": "kv/staging/pricing/partner-api-key", "version": 14,
                      "consumers": ["staging/lanefeed", "staging/lanefeed-backfill", "ci/partner-contract-tests"]})


def http_text_edge(rng: random.Random, status: int, reason: str, headers: dict[str, str], body: str) -> str:
    return http_text(status, reason, edge_headers(rng, headers), body)


def partner_codes(rng: random.Random) -> str:
    rows = []
    index = []
    for n in range(13):
        index.append(f"04:{20 + 5 * n:02d}" if 20 + 5 * n < 60 else f"05:{5 * n - 40:02d}")
        burst = n in (2, 3)
        rows.append([round(rng.uniform(1.2, 1.7), 3), round(rng.uniform(0.18, 0.25), 3) if burst else 0.0,
                     round(rng.uniform(0, 0.004), 4), 0.0 if n < 9 else round(rng.uniform(0.001, 0.01), 4)])
    return ("# sum by (code) (rate(partner_client_responses_total{service=\"lanefeed\"}[5m])), req/s\n"
            + frame_text(["202", "429", "5xx", "409"], rows, index, decimals=4))


def deploy_log(rng: random.Random) -> str:
    start = datetime(2026, 5, 12, 3, 8, 2)
    steps = ["Running with gitlab-runner 17.0.1 (44feccdf)", "  on k8s-runner-pricing-3 zxA8k2Qp",
             "Preparing the \"kubernetes\" executor", "Using Kubernetes namespace: ci-pricing",
             "Getting source from Git repository", "Fetching changes with git depth set to 20...",
             "Checking out 8d1f0c42 as detached HEAD (ref is v2.15.0)...", "$ helm dependency build charts/lanefeed",
             "Saving 2 charts", "Deleting outdated charts",
             "$ helm -n pricing upgrade lanefeed charts/lanefeed -f deploy/prod/values.yaml --set image.tag=v2.15.0 "
             "--atomic --timeout 10m", "Release \"lanefeed\" has been upgraded. Happy Helming!",
             "NAME: lanefeed", "LAST DEPLOYED: Tue May 12 03:09:44 2026", "NAMESPACE: pricing", "STATUS: deployed",
             "REVISION: 30", "$ kubectl -n pricing rollout status deployment/lanefeed --timeout=600s",
             "Waiting for deployment \"lanefeed\" rollout to finish: 1 of 4 updated replicas are available...",
             "Waiting for deployment \"lanefeed\" rollout to finish: 3 of 4 updated replicas are available...",
             "deployment \"lanefeed\" successfully rolled out", "$ ./bin/migrate up",
             "applying 0042_rates_partition_by_week.sql ... ok (41.8s, 18,224,301 rows moved)",
             "$ ./bin/smoke --env prod", "smoke: GET /actuator/health 200", "smoke: POST /internal/lanes/1/price 200 "
             "(812ms)", "smoke: passed (2 checks)", "Cleaning up project directory and file based variables",
             "Job succeeded"]
    lines = [f"{moment:%Y-%m-%dT%H:%M:%S}.{rng.randint(0, 999999):06d}Z 00O {text}"
             for moment, text in zip(moments(rng, start, len(steps), 1, 9), steps)]
    return http_text_edge(rng, 200, "OK", {"Date": "Tue, 12 May 2026 05:50:40 GMT",
                                           "Content-Type": "text/plain; charset=utf-8"}, "\n".join(lines))


def db_connections(rng: random.Random) -> str:
    rows = [["lanefeed", "active", 4], ["lanefeed", "idle in transaction", 0], ["rates-api", "idle", 38],
            ["rates-api", "active", 11], ["backfill", "idle", 6], ["metabase", "idle", 5], ["pg_cron", "idle", 1],
            ["ops", "active", 1], ["replication", "streaming", 2], ["pgbouncer-admin", "idle", 1]]
    waits = [[f"lanefeed-7d9c{hex_id(rng, 4)}", rng.choice(["ClientRead", "Lock:transactionid", "IO:DataFileRead"]),
              rng.randint(1, 900), "SELECT r.* FROM rates r WHERE r.lane_id = $1 AND r.week >= $2 ORDER BY ..."]
             for _ in range(8)]
    settings = [["max_connections", "400"], ["superuser_reserved_connections", "3"], ["shared_buffers", "8GB"],
                ["work_mem", "32MB"], ["idle_in_transaction_session_timeout", "60s"]]
    return (" max_connections\n-----------------\n 400\n(1 row)\n\n"
            + frame_text(["application_name", "state", "count"], rows, index=[""] * len(rows)) +
            "\n\n" + frame_text(["backend", "wait_event", "ms", "query"], waits, index=[""] * len(waits)) +
            f"\n({len(rows)} rows)\n\n" + frame_text(["setting", "value"], settings, index=[""] * len(settings)) +
            "\n\n# headroom: 400 - 69 in use = 331; lanefeed at 4 pods x 40 = 160 fits\n")


def code_search(rng: random.Random) -> str:
    hits = []
    for path, line in (("deploy/staging/lanefeed/values.yaml", "  partnerApiKey: vault:kv/staging/pricing/"
                                                               "partner-api-key"),
                       ("deploy/staging/backfill/values.yaml", "  partnerApiKey: vault:kv/staging/pricing/"
                                                               "partner-api-key"),
                       (".gitlab-ci.yml", "    PARTNER_API_KEY: $PARTNER_API_KEY  # staging only"),
                       ("docs/runbooks/partner-keys.md", "Rotate `partner-api-key` with `secrets rotate` and "
                                                         "restart consumers; scopes come from the template"),
                       ("scripts/contract-tests.sh", "curl -H \"X-Api-Key: ${PARTNER_API_KEY}\" \"$BASE/lanes/1\""),
                       ("archive/2025-hackweek/notebook.ipynb", "\"key = 'sk_stg_…'  # TODO remove\"")):
        hits.append({"project": rng.choice(["pricing/lanefeed", "pricing/deploy", "platform/runbooks",
                                            "pricing/hackweek"]), "path": path, "ref": "main",
                     "startline": rng.randint(3, 200), "data": line, "id": None,
                     "blob_id": hex_id(rng, 40)})
    return http_text_edge(rng, 200, "OK", {"Date": "Tue, 12 May 2026 04:46:11 GMT", "Content-Type": "application/json",
                                 "X-Total": str(len(hits)), "X-Page": "1", "X-Per-Page": "20",
                                 "X-Request-Id": hex_id(rng, 26)}, json_text(hits))


def webhook_logs(rng: random.Random) -> str:
    lines = []
    for moment in moments(rng, datetime(2026, 5, 12, 5, 10), 28, 10, 50):
        lane = rng.randint(1, 360)
        lines.append(f"{iso(moment)} INFO  [lanefeed-webhooks-{hex_id(rng, 5)}] c.o.l.hooks.PartnerCallback - "
                     f"lane={lane} job={hex_id(rng, 8)} event={rng.choice(['rates.accepted', 'rates.accepted', 'rates.indexed'])} "
                     f"latency_ms={rng.randint(200, 2400)} signature=valid")
    return "\n".join(lines) + f"\n-- {len(lines)} lines, 0 rejected, 0 signature failures"


def final_pods(rng: random.Random) -> str:
    pods = "\n".join(f"lanefeed-5b8f{hex_id(rng, 6)}-{token_id(rng, 5).lower()}   {rng.randint(180, 620)}m   "
                      f"{rng.randint(900, 1400)}Mi" for _ in range(4))
    events = "\n".join(f"{rng.randint(1, 59)}m   Normal   {reason}   {obj}   {message}" for reason, obj, message in (
        ("ScalingReplicaSet", "deployment/lanefeed", "Scaled up replica set lanefeed-5b8f to 4"),
        ("ScalingReplicaSet", "deployment/lanefeed", "Scaled down replica set lanefeed-7d9c to 0"),
        ("SuccessfulCreate", "replicaset/lanefeed-5b8f", "Created pod: lanefeed-5b8f"),
        ("Pulled", "pod/lanefeed-5b8f", "Container image \"registry.oceanix.example/pricing/lanefeed:v2.15.0\" "
                                        "already present on machine"),
        ("Started", "pod/lanefeed-5b8f", "Started container lanefeed"),
        ("SuccessfulRescale", "hpa/rates-api", "New size: 6; reason: cpu resource utilization above target"),
        ("Killing", "pod/rates-api-6f5d", "Stopping container rates-api"),
        ("BackOff", "pod/lanefeed-backfill-cron-29113", "Back-off restarting failed container (exit 0, idle)"),
        ("Completed", "job/ratesdb-vacuum-29112", "Job completed"),
        ("Sync", "ingress/lanefeed", "Scheduled for sync")))
    return "NAME                              CPU(cores)   MEMORY(bytes)\n" + pods + \
        "\n\nLAST SEEN   TYPE     REASON   OBJECT   MESSAGE\n" + events


def key_audit(rng: random.Random) -> str:
    events = []
    for moment in moments(rng, datetime(2026, 5, 11, 0), 26, 1800, 5400):
        events.append({"at": iso(moment, millis=False), "key": OLD_KEY, "actor": rng.choice(
            ["staging/lanefeed", "staging/lanefeed", "staging/lanefeed-backfill", "ci/partner-contract-tests",
             "unknown (203.0.113.77)"]), "action": rng.choice(["auth", "auth", "auth", "read"]),
            "result": "ok", "ip": f"10.{rng.randint(40, 45)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"})
    return json_text({"name": "partner-api-key", "environment": "staging", "window": "48h", "events": events,
                      "distinct_actors": 4, "note": "1 actor outside the VPC ranges (see SEC-2291)"}, indent=1)


def staging_rollout(rng: random.Random) -> str:
    lines = ["deployment.apps/lanefeed restarted", "deployment.apps/lanefeed-backfill restarted"]
    lines += [f"Waiting for deployment \"lanefeed\" rollout to finish: {n} of 2 updated replicas are available..."
              for n in range(2)]
    lines.append("deployment \"lanefeed\" successfully rolled out")
    logs = [f"{iso(t)} INFO  [lanefeed-6c4d{hex_id(rng, 6)}] c.o.l.config.PartnerClient - partner key loaded from "
            f"vault kv/staging/pricing/partner-api-key (version 14, id {NEW_KEY})" for t in
            moments(rng, datetime(2026, 5, 12, 4, 48), 2, 5, 20)]
    logs += [f"{iso(t)} INFO  [lanefeed-6c4d{hex_id(rng, 6)}] o.s.b.w.e.tomcat.TomcatWebServer - Tomcat started on "
             f"port(s): 8080 (http)" for t in moments(rng, datetime(2026, 5, 12, 4, 48, 30), 2, 5, 20)]
    logs += [f"{iso(t)} WARN  [lanefeed-backfill-{hex_id(rng, 5)}] c.o.l.backfill.Runner - no work scheduled, idle"
             for t in moments(rng, datetime(2026, 5, 12, 4, 49), 3, 5, 20)]
    return "\n".join(lines + ["", "--- startup logs ---"] + logs)


def scope_error(rng: random.Random) -> str:
    return http_text_edge(rng, 403, "Forbidden", {
        "Date": "Tue, 12 May 2026 04:51:02 GMT", "Content-Type": "application/problem+json",
        "X-Request-Id": hex_id(rng, 20), "X-Key-Id": NEW_KEY, "WWW-Authenticate": "Key realm=\"partner\", "
        "error=\"insufficient_scope\", scope=\"lanes:write\"", "Via": "1.1 partner-edge"},
        json_text({"type": "https://partner-api.oceanix.example/problems/insufficient-scope",
                   "title": "Forbidden", "status": 403, "detail": "key lacks scope lanes:write",
                   "required_scopes": ["lanes:write"], "granted_scopes": ["lanes:read"]}))


def sandbox_ok(rng: random.Random) -> str:
    return http_text_edge(rng, 202, "Accepted", {
        "Date": "Tue, 12 May 2026 04:53:40 GMT", "Content-Type": "application/json", "X-Key-Id": NEW_KEY,
        "X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "99", "X-Request-Id": hex_id(rng, 20)},
        json_text({"job": hex_id(rng, 8), "lane": 1, "state": "queued", "environment": "sandbox",
                   "received_rates": 6, "schema_version": 7}))


def ci_variable(rng: random.Random) -> str:
    return http_text_edge(rng, 200, "OK", {"Date": "Tue, 12 May 2026 04:55:12 GMT", "Content-Type": "application/json",
                                 "RateLimit-Remaining": "1998", "X-Request-Id": hex_id(rng, 26),
                                 "X-Runtime": f"0.{rng.randint(10000, 99999)}"},
                     json_text({"variable_type": "env_var", "key": "PARTNER_API_KEY",
                                "value": "vault:kv/staging/pricing/partner-api-key#v15", "protected": True,
                                "masked": True, "raw": False, "environment_scope": "staging",
                                "description": "partner sandbox key for contract tests"}))


def pipeline_output(rng: random.Random) -> str:
    jobs = [{"id": rng.randint(10**6, 10**7), "name": name, "stage": stage, "status": "success",
             "duration": round(rng.uniform(8, 140), 1)}
            for name, stage in (("build", "build"), ("unit", "test"), ("contract:partner-lanes", "contract"),
                                ("contract:partner-rates", "contract"), ("contract:partner-auth", "contract"))]
    return json_text({"id": rng.randint(10**5, 10**6), "ref": "main", "status": "success", "source": "api",
                      "created_at": "2026-05-12T04:55:30Z", "finished_at": "2026-05-12T05:01:48Z", "jobs": jobs,
                      "web_url": "https://ci.oceanix.example/pricing/lanefeed/-/pipelines/"
                                 f"{rng.randint(10**5, 10**6)}",
                      "log_tail": [f"[contract:partner-auth] {line}" for line in (
                          "Using PARTNER_API_KEY from vault (staging)", "auth: key accepted (scopes lanes:read "
                          "lanes:write)", "republish lane 1: 202", "republish lane 2: 202", "12 passed in 14.2s")]})


def revoked(rng: random.Random) -> str:
    return json_text({"revoked": True, "id": OLD_KEY, "name": "partner-api-key", "environment": "staging",
                      "revoked_at": "2026-05-12T05:03:09Z", "reason": "leaked (SEC-2291)",
                      "edge_propagation": "up to 60s", "audit_id": "aud_" + hex_id(rng, 12),
                      "remaining_active_keys": 1})


def staging_logs(rng: random.Random) -> str:
    lines = []
    for moment in moments(rng, datetime(2026, 5, 12, 4, 50), 18, 20, 60):
        if moment < datetime(2026, 5, 12, 4, 53):
            lines.append(f"{iso(moment)} WARN  [lanefeed-6c4d{hex_id(rng, 6)}] c.o.l.publish.PartnerClient - "
                         f"republish lane={rng.randint(1, 20)} -> 403 insufficient_scope (lanes:write)")
        else:
            lines.append(f"{iso(moment)} INFO  [lanefeed-6c4d{hex_id(rng, 6)}] c.o.l.http.AccessLog - "
                         f"{rng.choice(['GET /actuator/health 200', 'POST /internal/lanes/' + str(rng.randint(1, 480)) + '/price 200'])} "
                         f"{rng.randint(3, 180)}ms")
    return "\n".join(lines) + f"\n-- {len(lines)} lines; filter matched {sum('403' in l for l in lines)} auth errors"


def reefer_conflicts(table: list[dict[str, object]]) -> list[int]:
    """Two reefer lanes of the last batch whose contract the partner has not moved to schema 7."""
    reefers = [int(row["lane"]) for row in table[360:480] if row["class"] == "RF"]  # type: ignore[arg-type]
    return [reefers[2], reefers[6]]


def conflict_replay(rng: random.Random, table: list[dict[str, object]]) -> str:
    output, _ = replay_output(rng, table, 361, 480, limit_hit=False)
    lines = output.splitlines()
    patched = []
    for line in lines:
        if any(f" lane {lane:04d} " in line for lane in reefer_conflicts(table)):
            patched.append(line.split(" 202 ")[0] + " 409 Conflict code=schema_rejected")
        else:
            patched.append(line)
    return "\n".join(patched).replace('"failed": 0', '"failed": 2')


def conflict_detail(rng: random.Random, lane: int) -> str:
    return http_text_edge(rng, 200, "OK", {"Date": "Tue, 12 May 2026 05:38:44 GMT", "Content-Type": "application/json",
                                 "X-RateLimit-Limit": "600", "X-Request-Id": hex_id(rng, 20)},
                     json_text({"lane": lane, "last_error": {"at": "2026-05-12T05:36:12Z", "status": 409,
                                                            "code": "schema_rejected",
                                                            "detail": "schema_version 7 is not enabled for contract "
                                                                      "RF-LEGACY-2019; send X-Schema-Version: 6 or "
                                                                      "migrate the contract",
                                                            "contract": "RF-LEGACY-2019", "class": "RF"},
                                "compat": {"accepted_schema_versions": [5, 6], "header": "X-Schema-Version"},
                                "history": [{"at": iso(t, millis=False), "status": 202}
                                            for t in moments(rng, datetime(2026, 5, 1), 8, 60000, 90000)]}))


def state_table(rng: random.Random, table: list[dict[str, object]]) -> str:
    hz = len(hazardous(table, 1, 480))
    rows = [[480 - hz - (2 if n == 0 else 0), 2 if n == 0 else 0, hz, 0] for n in range(5)]
    index = [f"05:{30 + 5 * n:02d}" for n in range(5)]
    by_class = [[cls, sum(1 for r in table if r["class"] == cls), rng.randint(180, 420), rng.randint(0, 3)]
                for cls in ("GEN", "RF", "HZ", "OOG")]
    latency = [[f"05:{30 + 5 * n:02d}", rng.randint(150, 230), rng.randint(300, 520), rng.randint(0, 2)]
               for n in range(5)]
    return ("# count by (state) (lanefeed_lane_publish_state{lane=~\"1..480\"})\n"
            + frame_text(["published", "conflict", "manual", "stale"], rows, index)
            + "\n\n# count by (class), p99 publish latency (ms), retries in the last 20m\n"
            + frame_text(["class", "lanes", "p99_ms", "retries"], by_class)
            + "\n\n# partner ack latency p50/p99 (ms), 5xx from partner\n"
            + frame_text(["time", "p50_ms", "p99_ms", "partner_5xx"], latency))


def partner_view(rng: random.Random, table: list[dict[str, object]]) -> str:
    hz = set(hazardous(table, 1, 480))
    current = [lane for lane in range(1, 481) if lane not in hz]
    return http_text_edge(rng, 200, "OK", {"Date": "Tue, 12 May 2026 05:49:02 GMT", "Content-Type": "application/json",
                                 "X-Total-Count": str(len(current)), "X-RateLimit-Remaining": "588",
                                 "X-Request-Id": hex_id(rng, 20)},
                     json_text({"count": len(current), "states": {"current": len(current)},
                                "lanes_current": current, "updated_since": "2026-05-12T04:30:00Z",
                                "next_cursor": None}, indent=None))


def build() -> Scenario:
    rng = random.Random(SEED)
    table = lanes(rng)
    run = RunBuilder.opened(TRACE_ID, TOOLS, SYSTEM, TASK)
    run.act("Starting with the error logs since the deploy.",
            Call("query_logs", {"service": "lanefeed", "since": "2026-05-12T03:05:00Z",
                                "query": "{app=\"lanefeed\"} |~ \"ERROR|WARN|503\"", "limit": 40}, error_logs(rng)))
    run.act("Every failure is a Hikari pool timeout, and the pool shows total=4 with dozens of threads waiting. Checking the "
            "metrics around the deploy.",
            Call("query_metrics", {"promql": "lanefeed publish error ratio, p99, rps, hikari pool",
                                   "start": "2026-05-12T02:30:00Z", "end": "2026-05-12T04:00:00Z", "step": "5m"},
                 metrics_table(rng, datetime(2026, 5, 12, 2, 30), 19, 19)))
    run.act("The pool is pinned at 4 active connections from 03:10 on. Looking at the deployment spec and what "
            "changed in the chart.", Call("kubectl", {"args": "-n pricing get deployment lanefeed -o yaml && helm "
                                                              "-n pricing diff revision lanefeed 29 30"},
                                          deployment_yaml(rng), labels=("rollback",)))
    run.act("Found it: v2.15.0's chart sets DB_POOL_MAX to 4 (was 40) while publish concurrency is 64. Checking "
            "whether a rollback is possible.",
            Call("kubectl", {"args": "-n pricing rollout history deployment/lanefeed && kubectl -n pricing rollout "
                                     "undo deployment/lanefeed --dry-run=server"}, rollback_error(rng),
                 labels=("rollback",)), labels=("rollback",))
    run.act("`rollout undo` fails: revisionHistoryLimit is 0, so no previous ReplicaSet is kept, and migration 0042 "
            "moved data irreversibly, so v2.14.3 would run against a schema it doesn't know. Rollback is not an "
            "option. Before raising the pool instead, checking the database can take 4 × 40 connections.",
            Call("kubectl", {"args": "-n pricing exec statefulset/ratesdb-0 -- psql -U ops -c \"SHOW "
                                     "max_connections\" -c \"SELECT application_name, state, count(*) FROM "
                                     "pg_stat_activity GROUP BY 1, 2 ORDER BY 3 DESC\""}, db_connections(rng)),
            labels=("rollback",))
    run.act("The database has room (331 free connections). Decision: keep v2.15.0 and hotfix DB_POOL_MAX back to "
            "40 rather than roll back. Filing the change request.",
            Call("change_request", {"action": "create", "summary": "lanefeed: DB_POOL_MAX 4 -> 40 (hotfix for "
                                                                     "INC-7731)", "risk": "low"},
                 change_created(rng), labels=("change",)), labels=("decision",))
    run.user("顺便说一下，状态更新里请附上 UTC 时间，伙伴团队在不同时区。", labels=("utc",))
    run.act("好的。CHG-2026-0519 was auto-approved as a standard change (STD-117). Applying the hotfix.",
            Call("kubectl", {"args": "-n pricing set env deployment/lanefeed DB_POOL_MAX=40 && kubectl -n pricing "
                                     "rollout status deployment/lanefeed && kubectl -n pricing get pods -o wide"},
                 rollout_output(rng)), labels=("change",))
    run.act("Rolled out. Checking that the errors stop.",
            Call("query_metrics", {"promql": "lanefeed publish error ratio, p99, rps, hikari pool",
                                   "start": "2026-05-12T03:55:00Z", "end": "2026-05-12T04:30:00Z", "step": "5m"},
                 metrics_table(rng, datetime(2026, 5, 12, 3, 55), 14, 2)))
    run.act("Error ratio is back to ~0 since 04:05, p99 under 250 ms, pool at 9–22 active. Posting status.",
            Call("post_status", {"channel": "#inc-7731", "text": "[04:28 UTC] Cause: lanefeed v2.15.0 shipped "
                                 "DB_POOL_MAX=4 (was 40). Hotfixed to 40 under CHG-2026-0519 at 04:06 UTC, no "
                                 "rollback (irreversible migration 0042). Publishing healthy again. Next: "
                                 "re-publish lanes 1–480 to the partner."}, status_ack(rng, "#inc-7731")),
            labels=("change",))
    run.act("Listing the lanes to replay.", Call("lane_inventory", {"from_lane": 1, "to_lane": 120},
                                                 inventory(table, 1, 120)))
    run.user("One thing: could you leave the hazmat lanes out of the replay? The manual desk re-publishes those by "
             "hand.", labels=("hazmat",))
    hz_first = hazardous(table, 1, 120)
    run.act(f"Noted — lanes of class HZ (hazmat, IMDG) stay out: in 1–120 that's lanes {', '.join(map(str, hz_first))}. "
            "Dry run first.", Call("replay_lanes", {"from_lane": 1, "to_lane": 120, "exclude_classes": ["HZ"],
                                                    "dry_run": True},
                                   json_text({"dry_run": True, "would_request": 120 - len(hz_first),
                                              "skipped": hz_first, "estimated_seconds": 45,
                                              "payload_sample": {"lane": 1, "rates": [{"container": c, "amount":
                                                                                      rng.randint(900, 4200),
                                                                                      "currency": "USD"}
                                                                                     for c in ("20DV", "40DV", "40HC",
                                                                                               "45HC", "20RF",
                                                                                               "40RF")],
                                                                 "valid_from": "2026-05-12",
                                                                 "schema_version": 7}})),
            labels=("hazmat",))
    output, failed = replay_output(rng, table, 1, 120, limit_hit=True)
    run.act("Dry run looks right. Running lanes 1–120.",
            Call("replay_lanes", {"from_lane": 1, "to_lane": 120, "exclude_classes": ["HZ"]}, output))
    run.act(f"{len(failed)} lanes got 429 after the first 100 requests in the minute. Checking the partner's limits.",
            Call("http_request", {"method": "GET", "url": f"{PARTNER}/rate_limits"}, rate_limit_doc(rng)))
    retry, _ = replay_output(rng, table, 1, 120, limit_hit=False, only=failed)
    run.act("Learned: the partner API allows 100 requests per minute per key for republish (X-RateLimit-Limit: 100, "
            "60 s window, no burst). I'll pace at 90 per minute from now on. Retrying the lanes that got 429.",
            Call("replay_lanes", {"from_lane": 1, "to_lane": 120, "only_lanes": failed, "max_per_minute": 90}, retry),
            labels=("rate",))
    run.act("Lanes 1–120 done (hazmat lanes skipped). Next: lanes 121–240.",
            Call("post_status", {"channel": "#inc-7731", "text": "[04:39 UTC] Replay: lanes 1–120 done (HZ lanes "
                                 "left to the manual desk). Partner limit is 100 req/min, pacing at 90. Next: lanes "
                                 "121–240."}, status_ack(rng, "#inc-7731")), labels=("next", "rate", "hazmat"))
    run.user("Sorry to interrupt — could you pause that and first rotate the staging API key? Security flagged it in "
             "the leaked-credentials scan (SEC-2291).")
    run.act("Pausing the replay after lane 120. Looking at the staging keys.",
            Call("secrets", {"action": "list", "name": "*", "environment": "staging"}, key_list(rng)))
    run.act(f"{OLD_KEY} is the flagged one. Checking where it was used before rotating.",
            Call("secrets", {"action": "audit", "name": "partner-api-key", "environment": "staging"},
                 key_audit(rng)))
    run.act("Besides the known consumers there's one call from outside the VPC — that's the leak. Checking code "
            "and CI config for other references to the key before rotating.",
            Call("http_request", {"method": "GET", "url": "https://git.oceanix.example/api/v4/search?scope=blobs&"
                                                          "search=partner-api-key"}, code_search(rng)))
    run.act("Used by staging lanefeed, the backfill job and the CI contract tests. Rotating.",
            Call("secrets", {"action": "rotate", "name": "partner-api-key", "environment": "staging"}, rotated(rng),
                 labels=("key",)))
    run.act(f"New key {NEW_KEY}; the old one stays valid for a 24 h grace period. Rolling staging lanefeed onto it.",
            Call("kubectl", {"args": "--context staging -n pricing rollout restart deployment/lanefeed "
                                     "deployment/lanefeed-backfill && kubectl --context staging -n pricing rollout "
                                     "status deployment/lanefeed"}, staging_rollout(rng), labels=("key",)),
            labels=("key",))
    run.act("Checking staging can publish with the new key.",
            Call("http_request", {"method": "POST", "url": "https://partner-sandbox.oceanix.example/v3/lanes/1/"
                                                           "republish", "headers": {"X-Key-Id": NEW_KEY}},
                 scope_error(rng), labels=("key",)), labels=("key",))
    run.act("403: the new key only got lanes:read (the rotation template's default). Adding lanes:write.",
            Call("secrets", {"action": "update", "name": "partner-api-key", "environment": "staging",
                             "scopes": ["lanes:read", "lanes:write"]},
                 json_text({"updated": True, "id": NEW_KEY, "scopes": ["lanes:read", "lanes:write"],
                            "version": 15, "propagation": "up to 60s at the edge",
                            "audit_id": "aud_" + hex_id(rng, 12)}), labels=("key",)),
            labels=("key",))
    run.act("Retrying the staging publish.",
            Call("http_request", {"method": "POST", "url": "https://partner-sandbox.oceanix.example/v3/lanes/1/"
                                                           "republish", "headers": {"X-Key-Id": NEW_KEY}},
                 sandbox_ok(rng), labels=("key",)), labels=("key",))
    run.act("Staging works with the new key. Updating the CI variable used by the contract tests.",
            Call("http_request", {"method": "PUT", "url": "https://ci.oceanix.example/api/v4/projects/412/variables/"
                                                          "PARTNER_API_KEY", "body": {"value": "vault:kv/staging/"
                                                                                      "pricing/partner-api-key#v15",
                                                                                      "masked": True,
                                                                                      "environment_scope": "staging"}},
                 ci_variable(rng)))
    run.act("Running the contract tests against the sandbox to be sure CI picked it up.",
            Call("http_request", {"method": "POST", "url": "https://ci.oceanix.example/api/v4/projects/412/pipeline",
                                  "body": {"ref": "main", "variables": [{"key": "ONLY", "value": "contract"}]}},
                 pipeline_output(rng)))
    run.act("Contract tests green. Revoking the old key now instead of waiting for the grace period, since it "
            "leaked.", Call("secrets", {"action": "revoke", "name": "partner-api-key", "environment": "staging"},
                            revoked(rng)))
    run.act("Checking staging logs for auth errors after the revoke.",
            Call("query_logs", {"service": "lanefeed", "since": "2026-05-12T04:55:00Z",
                                "query": "{env=\"staging\"} |~ \"401|403|auth\"", "limit": 30}, staging_logs(rng)))
    run.act("Only the expected 403s from before the scope fix; nothing since the revoke. Reporting to security.",
            Call("post_status", {"channel": "#sec-2291", "text": "[05:06 UTC] Staging partner key rotated: old key "
                                 "revoked at 05:03 UTC, new key in vault kv/staging/pricing/partner-api-key v15 "
                                 "(lanes:read, lanes:write). Consumers updated: staging lanefeed, backfill, CI "
                                 "contract tests (green)."}, status_ack(rng, "#sec-2291")))
    run.user("Thanks, that's done then. Please go back to the replay.")
    run.probes(
        ("next-lanes", "pending", "The agent wrote where the batch stopped before the switch; resuming needs it.",
         ["next"], [], [r"121\s*[-–]\s*240"]),
        ("hazmat", "constraint", "The user's polite request to leave hazmat lanes out applies to every batch.",
         ["hazmat"], ["hazmat"], []),
        ("rate-limit", "fact", "The partner's limit was learned from 429s and headers; the next batch must be "
         "paced.", ["rate"], ["100 requests per minute", "100 req/min"], []))
    second, _ = replay_output(rng, table, 121, 240, limit_hit=False)
    run.act("Resuming with lanes 121–240, hazmat lanes excluded, paced at 90 per minute.",
            Call("replay_lanes", {"from_lane": 121, "to_lane": 240, "exclude_classes": ["HZ"], "max_per_minute": 90},
                 second))
    run.act("All 110 accepted, no 429s at 90 per minute. Checking the partner-side error rate for the last hour.",
            Call("query_metrics", {"promql": "sum by (code) (rate(partner_client_responses_total[5m]))",
                                   "start": "2026-05-12T04:20:00Z", "end": "2026-05-12T05:20:00Z", "step": "5m"},
                 partner_codes(rng)))
    run.act("Clean since the pacing. Listing 241–480 before the next batches.",
            Call("lane_inventory", {"from_lane": 241, "to_lane": 360}, inventory(table, 241, 360)))
    third, _ = replay_output(rng, table, 241, 360, limit_hit=False)
    run.act("Running 241–360.", Call("replay_lanes", {"from_lane": 241, "to_lane": 360, "exclude_classes": ["HZ"],
                                                      "max_per_minute": 90}, third))
    run.act("241–360 accepted. Checking the partner's webhook callbacks for rejected payloads so far.",
            Call("query_logs", {"service": "lanefeed-webhooks", "since": "2026-05-12T05:10:00Z",
                                "query": "{app=\"lanefeed-webhooks\"} |= \"partner\"", "limit": 40},
                 webhook_logs(rng)))
    run.act("Listing 361–480.", Call("lane_inventory", {"from_lane": 361, "to_lane": 480},
                                     inventory(table, 361, 480)))
    fourth = conflict_replay(rng, table)
    run.act("Running 361–480.", Call("replay_lanes", {"from_lane": 361, "to_lane": 480, "exclude_classes": ["HZ"],
                                                      "max_per_minute": 90}, fourth))
    first, second = reefer_conflicts(table)
    run.act(f"Lanes {first} and {second} got 409 from the partner. Looking at the partner's error for {first}.",
            Call("http_request", {"method": "GET", "url": f"{PARTNER}/lanes/{first}/republish/last_error"},
                 conflict_detail(rng, first)))
    run.probe("no-rollback", "failure", "The agent proved early that a rollback is impossible; faced with a "
              "v2.15.0 payload problem it must not try `rollout undo` again.", ["rollback"],
              contains=["revisionHistoryLimit"], matches=[r"rollout undo"])
    run.act("The partner rejects schema 7 for reefer lanes on the old contract. Rolling back is still impossible "
            "(revisionHistoryLimit 0, irreversible migration 0042), so I'll republish these two lanes with the "
            "partner's schema-6 compatibility header instead.",
            Call("replay_lanes", {"from_lane": 361, "to_lane": 480, "only_lanes": [first, second], "max_per_minute": 90,
                                  "headers": {"X-Schema-Version": "6"}},
                 replay_output(rng, table, 361, 480, limit_hit=False, only=[first, second])[0]))
    run.act("Both accepted. Verifying publish state for all 480 lanes.",
            Call("query_metrics", {"promql": "count by (state) (lanefeed_lane_publish_state)",
                                   "start": "2026-05-12T05:30:00Z", "end": "2026-05-12T05:50:00Z", "step": "5m"},
                 state_table(rng, table)))
    run.act("Checking the partner's own view of the lanes.",
            Call("http_request", {"method": "GET", "url": f"{PARTNER}/lanes?updated_since=2026-05-12T04:30:00Z"
                                                          "&fields=lane,state&limit=500"}, partner_view(rng, table)))
    run.act(f"{480 - len(hazardous(table, 1, 480))} current. Pulling the deploy job log for the incident timeline.",
            Call("http_request", {"method": "GET", "url": "https://ci.oceanix.example/api/v4/projects/412/jobs/"
                                                          "48213/trace"}, deploy_log(rng)))
    run.act("Timeline complete. A last look at the pool and pods before closing.",
            Call("kubectl", {"args": "-n pricing top pods -l app.kubernetes.io/name=lanefeed && kubectl -n pricing "
                                     "get events --sort-by=.lastTimestamp | tail -25"}, final_pods(rng)))
    run.probes(
        ("change-id", "approval", "The change id came only from the change-management tool; the closing status "
         "must cite it.", ["change"], ["CHG-2026-0519"], []),
        ("hotfix-decision", "decision", "The agent decided to hotfix rather than roll back; the summary must say "
         "why.", ["decision"], ["rather than roll back"], []),
        ("utc-times", "constraint", "The user asked in Chinese for UTC times in status updates.", ["utc"],
         ["附上 UTC 时间"], []),
        ("staging-key", "fact", "The new staging key id from the rotation subtask belongs in the summary.",
         ["key"], [NEW_KEY], []))
    hz_all = hazardous(table, 1, 480)
    run.act("Posting the closing status.",
            Call("post_status", {"channel": "#inc-7731", "text": (
                f"[05:52 UTC] INC-7731 resolved. Cause: v2.15.0 set DB_POOL_MAX=4. Fix: hotfix to 40 under "
                f"CHG-2026-0519 (04:06 UTC); no rollback possible (revisionHistoryLimit 0, migration 0042). Replay: "
                f"{480 - len(hz_all)} lanes re-published, {len(hz_all)} hazmat lanes left to the manual desk, lanes {first} "
                f"and {second} via schema-6 header. Also: staging partner key rotated to {NEW_KEY} (SEC-2291). "
                "Follow-ups: revisionHistoryLimit >= 3, pool size alert.")}, status_ack(rng, "#inc-7731")))
    run.say(f"INC-7731 is resolved: the pool hotfix is live under CHG-2026-0519, {480 - len(hz_all)} lanes are "
            f"re-published (hazmat lanes {', '.join(map(str, hz_all[:6]))}… left to the manual desk), and the staging "
            "key is rotated. Follow-ups are in the channel.")
    return run.finish()
