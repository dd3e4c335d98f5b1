#!/usr/bin/env bash
# Packs the library and builds two FRESH Nest 11 apps from registry packages (typeorm@^0.3 and
# typeorm@^1), the tarball installed by path, compiled with the app's own typescript. Each compiled app
# (app/: its own TypeOrmModule.forRootAsync + ConfigService, its own ScheduleModule.forRoot() with an
# @Interval(100), DurableExecutionModule.forRootAsync on database.dataSourceName 'default') then runs,
# on throw-away databases, in both migration modes (MIGRATIONS=module: the module applies its
# migrations; MIGRATIONS=app: the app's DataSource lists DURABLE_EXECUTION_MIGRATIONS with
# migrationsRun: true, and the module has database.migrationsRun: false):
#   - an API process (worker.enabled false, the workflow not registered; on Express with the module's
#     migrations, on Fastify with the app's) starts a typed run over HTTP
#     (runs.start(GreetingWorkflow, input)), its controller reads it through the four injected services
#     (RunRepository, CheckpointService, CommandGateway, LeaseService), and DurableExceptionFilter maps
#     every request-time code;
#   - a worker process (the workflow registered) finishes it: the run is polled to 'succeeded';
#   - in both processes the app's interval ticks about once per 100 ms (7-13 ticks in 1 s, not twice),
#     and the worker process lists the module's jobs (worker poll, reconciler, schedules, worker presence) in its SchedulerRegistry;
#   - on the app-migrated database, a boot with the module's migrationsRun left true fails fast with
#     DURABLE_SCHEMA_CONFLICT;
#   - the app's own jest test (app/test/) skips a 24 h sleep and a 3-day signal timeout with the
#     package's test clock (nestjs-durable-execution/testing).
# Needs psql and a PostgreSQL where the user may create databases: FRESH_APP_PG_URL, else DATABASE_URL,
# else postgres://root@127.0.0.1:5432/test. Packs dist/ as built: run `npm run build` first.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
template="$root/test/fresh-app/app"
admin_url="${FRESH_APP_PG_URL:-${DATABASE_URL:-postgres://root@127.0.0.1:5432/test}}"
command -v psql >/dev/null || { echo "fresh apps: psql not found" >&2; exit 1; }
work="$(mktemp -d)"
pids=()
dbs=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for db in "${dbs[@]}"; do psql "$admin_url" -qAtc "drop database if exists \"$db\" with (force)" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT
start_s=$SECONDS
fail() { echo "fresh apps: $*" >&2; exit 1; }
db_url() { node -e 'const u = new URL(process.argv[1]); u.pathname = "/" + process.argv[2]; console.log(u.href)' "$admin_url" "$1"; }
sql() { psql "$1" -qAtc "$2"; }

cd "$root"
tarball="$work/$(npm pack --silent --pack-destination "$work" | tail -1)"

# Two apps from the same template, installed in parallel (npm's cache serves what it already has).
install_app() { # dir typeorm-range
  mkdir -p "$1"
  cp -r "$template/src" "$template/test" "$template/tsconfig.json" "$template/tsconfig.spec.json" "$1/"
  sed -e "s#@TARBALL@#$tarball#" -e "s#@TYPEORM@#$2#" "$template/package.json.in" > "$1/package.json"
  (cd "$1" && npm install --prefer-offline --no-audit --no-fund --loglevel=error >install.log 2>&1) ||
    { cat "$1/install.log" >&2; return 1; }
  (cd "$1" && ./node_modules/.bin/tsc -p tsconfig.json)
}
install_app "$work/app-typeorm03" '^0.3' & i1=$!
install_app "$work/app-typeorm1" '^1' & i2=$!
wait "$i1" || fail "installing or compiling the typeorm@^0.3 app failed"
wait "$i2" || fail "installing or compiling the typeorm@^1 app failed"
echo "fresh apps: installed and compiled in $((SECONDS - start_s)) s"
for app in app-typeorm03 app-typeorm1; do
  echo "fresh apps: $app: $(cd "$work/$app" && node -p '["@nestjs/core", "@nestjs/typeorm", "@nestjs/config", "@nestjs/schedule", "typeorm", "pg", "typescript"].map((p) => p + "@" + JSON.parse(require("fs").readFileSync("node_modules/" + p + "/package.json", "utf8")).version).join(" ")')"
done

# Starts `node dist/main.js` with the env given; waits for its READY or BOOT_FAILED line (or its exit).
# Sets $proc_pid, $proc_log and $proc_line.
boot() { # app-dir log-name env...
  local dir="$1" name="$2"; shift 2
  proc_log="$work/$name.log"
  (cd "$dir" && exec env "$@" node dist/main.js >"$proc_log" 2>&1) & proc_pid=$!
  pids+=("$proc_pid")
  proc_line=""
  for _ in $(seq 1 300); do
    proc_line="$(grep -m1 -E '^(READY|BOOT_FAILED)' "$proc_log" || true)"
    [ -n "$proc_line" ] && return 0
    kill -0 "$proc_pid" 2>/dev/null || break
    sleep 0.1
  done
  proc_line="$(grep -m1 -E '^(READY|BOOT_FAILED)' "$proc_log" || true)"
  [ -n "$proc_line" ] || { cat "$proc_log" >&2; fail "$name printed neither READY nor BOOT_FAILED"; }
}
stop() { kill -TERM "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
ticks_ok() { [ "$1" -ge 7 ] && [ "$1" -le 13 ] || fail "$2: the app's @Interval(100) ticked $1 times in 1 s (expected 7-13)"; }

scenario() { # app-dir label migrations-mode
  local dir="$1" label="$2" mode="$3"
  local db="fresh_app_$$_${label//[^a-z0-9]/_}_$mode"
  local url; url="$(db_url "$db")"
  dbs+=("$db")
  sql "$admin_url" "create database \"$db\""
  local t0=$SECONDS

  # The API process on Express with the module's migrations, on Fastify with the app's.
  local http; http="$([ "$mode" = app ] && echo fastify || echo express)"
  boot "$dir" "$label-$mode-api" ROLE=api MIGRATIONS="$mode" DATABASE_URL="$url" PORT=0 HTTP="$http"
  [[ "$proc_line" == "READY api port="* ]] || { cat "$proc_log" >&2; fail "$label/$mode: the API process did not boot: $proc_line"; }
  grep -qx "HTTP $http" "$proc_log" || { cat "$proc_log" >&2; fail "$label/$mode: the API process is not on $http"; }
  local api=$proc_pid port="${proc_line#READY api port=}"
  local id
  id="$(node -e 'fetch(process.argv[1], { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ name: "fresh app" }) })
    .then(async (r) => { const b = await r.json(); if (r.status !== 201) throw new Error(r.status + " " + JSON.stringify(b)); console.log(b.id); })
    .catch((e) => { console.error(e.message); process.exit(1); })' "http://127.0.0.1:$port/greetings")" ||
    { cat "$proc_log" >&2; fail "$label/$mode: POST /greetings failed"; }
  local api_ticks
  api_ticks="$(node -e 'fetch(process.argv[1]).then((r) => r.json()).then((b) => console.log(b.ticks))' "http://127.0.0.1:$port/ticks")"
  ticks_ok "$api_ticks" "$label/$mode API process"
  # DurableExceptionFilter maps each code a request can raise to its HTTP status.
  node -e '
    const expected = { DURABLE_RUN_NOT_FOUND: 404, DURABLE_COMMAND_NOT_FOUND: 404, DURABLE_INVALID_RUN_STATE: 409,
      DURABLE_INVALID_COMMAND_STATE: 409, DURABLE_IDEMPOTENCY_CONFLICT: 409, DURABLE_INVALID_ARGUMENT: 400,
      DURABLE_NOT_SERIALIZABLE: 400, DURABLE_PAYLOAD_TOO_LARGE: 413 };
    (async () => {
      for (const [code, status] of Object.entries(expected)) {
        const r = await fetch(process.argv[1] + code, { method: "POST" });
        const b = await r.json();
        if (r.status !== status || b.code !== code) throw new Error(code + ": " + r.status + " " + JSON.stringify(b));
      }
    })().catch((e) => { console.error(e.message); process.exit(1); })' "http://127.0.0.1:$port/errors/" ||
    { cat "$proc_log" >&2; fail "$label/$mode: DurableExceptionFilter did not map a code to its status"; }
  [ "$(sql "$url" "select status from ai_runs where id = '$id'")" = pending ] ||
    fail "$label/$mode: the run is not pending after the API process started it"
  # The four services of the card, injected into the app's controller.
  local overview
  overview="$(node -e 'fetch(process.argv[1]).then((r) => r.text()).then((t) => console.log(t))' "http://127.0.0.1:$port/runs/$id/overview")"
  [ "$overview" = '{"status":"pending","checkpoints":0,"commands":0,"holder":null}' ] ||
    { cat "$proc_log" >&2; fail "$label/$mode: GET /runs/:id/overview (the four services) answered $overview"; }
  stop "$api"

  boot "$dir" "$label-$mode-worker" ROLE=worker MIGRATIONS="$mode" DATABASE_URL="$url"
  [[ "$proc_line" == "READY worker ticks="* ]] || { cat "$proc_log" >&2; fail "$label/$mode: the worker process did not boot: $proc_line"; }
  local worker=$proc_pid rest="${proc_line#READY worker ticks=}"
  local worker_ticks="${rest%% *}" jobs="${rest#* jobs=}"
  [ "$jobs" = "durable-execution:reconciler,durable-execution:schedules,durable-execution:worker-poll,durable-execution:worker-presence" ] ||
    fail "$label/$mode: the module's jobs in the app's SchedulerRegistry are '$jobs'"
  ticks_ok "$worker_ticks" "$label/$mode worker process"
  local status=""
  for _ in $(seq 1 150); do
    status="$(sql "$url" "select status from ai_runs where id = '$id'")"
    [ "$status" = succeeded ] && break
    sleep 0.2
  done
  [ "$status" = succeeded ] || { cat "$proc_log" >&2; fail "$label/$mode: run $id is '$status', not succeeded, after 30 s"; }
  [ "$(sql "$url" "select output->>'greeting' from ai_runs where id = '$id'")" = "hello, fresh app" ] ||
    fail "$label/$mode: run $id succeeded with an unexpected output"
  # Its @DurableTransaction wrote the app's own table once, through this app's typeorm.
  [ "$(sql "$url" "select output->>'logged' from ai_runs where id = '$id'")" = 1 ] &&
    [ "$(sql "$url" "select count(*) from greeting_log where name = 'fresh app:$id'")" = 1 ] ||
    fail "$label/$mode: run $id: its durable transaction did not write greeting_log exactly once"
  stop "$worker"

  # Which table recorded the module's migrations.
  count_rows() { [ "$(sql "$url" "select to_regclass('$1') is not null")" = t ] && sql "$url" "select count(*) from $1" || echo 0; }
  local module_rows app_rows
  module_rows="$(count_rows ai_migrations)"
  app_rows="$(count_rows migrations)"
  if [ "$mode" = module ]; then
    [ "$module_rows" -gt 0 ] && [ "$app_rows" -eq 0 ] || fail "$label/module: ai_migrations has $module_rows rows, the app's table $app_rows"
  else
    [ "$module_rows" -eq 0 ] && [ "$app_rows" -gt 0 ] || fail "$label/app: ai_migrations has $module_rows rows, the app's table $app_rows"
    # The misconfiguration: the module's migrationsRun left true on the app-migrated database.
    boot "$dir" "$label-$mode-misconfigured" ROLE=worker MIGRATIONS=app MODULE_MIGRATIONS_RUN=true DATABASE_URL="$url"
    set +e; wait "$proc_pid"; local code=$?; set -e
    [[ "$proc_line" == "BOOT_FAILED code=DURABLE_SCHEMA_CONFLICT"* ]] && [ "$code" -ne 0 ] ||
      { cat "$proc_log" >&2; fail "$label/app: a boot with the module's migrationsRun true did not fail with DURABLE_SCHEMA_CONFLICT (exit $code): $proc_line"; }
  fi
  sql "$admin_url" "drop database \"$db\" with (force)"
  echo "fresh apps: $label, migrations by the $mode: run $id started by the API process ($http; typed; 8 error codes mapped by the filter), succeeded in the worker; ticks in 1 s: API $api_ticks, worker $worker_ticks$([ "$mode" = app ] && echo '; module migrationsRun true fails with DURABLE_SCHEMA_CONFLICT') ($((SECONDS - t0)) s)"
}

# The app's own jest test with the package's test clock: a 24 h sleep and a 3-day timeout skipped.
clock_test() { # app-dir label
  local db="fresh_app_$$_clock_${2//[^a-z0-9]/_}"
  dbs+=("$db")
  sql "$admin_url" "create database \"$db\""
  local t0=$SECONDS
  (cd "$1" && DATABASE_URL="$(db_url "$db")" ./node_modules/.bin/jest >"$work/$db.log" 2>&1) ||
    { cat "$work/$db.log" >&2; fail "$2: the app's jest test with the test clock failed"; }
  sql "$admin_url" "drop database \"$db\" with (force)"
  echo "fresh apps: $2: the app's jest test skipped a 24 h sleep and a 3-day signal timeout ($((SECONDS - t0)) s)"
}

for app in app-typeorm03 app-typeorm1; do
  dir="$work/$app"
  label="typeorm@$(node -p 'require(process.argv[1]).version' "$dir/node_modules/typeorm/package.json")"
  scenario "$dir" "$label" module
  scenario "$dir" "$label" app
  clock_test "$dir" "$label"
done
echo "fresh apps: done in $((SECONDS - start_s)) s"
