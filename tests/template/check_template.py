#!/usr/bin/env python3
"""Translates template.yaml to plain CloudFormation with aws-sam-translator (offline) and asserts
the deployment's operational properties on the translated resources: failure handling of the
materializer, the prune schedule (on the maintenance function), CORS per dialect, point-in-time
recovery, prefix-scoped listing, API access logs and throttling, reserved and provisioned
concurrency of the query functions, secrets read at init with scoped grants (no dynamic
references, no `*` resources), catalog connection limits, the maintenance function sharing the
drain's lease, EMF stage/function dimensions with their alarms and the dashboard, X-Ray tracing,
and the optional native gRPC service. Also checks that every samconfig.toml parameter override
names a template parameter and satisfies its constraints. Exits non-zero with one line per failed
check. tests/template/check_build.py checks that `sam build` builds what `make lambda` builds.

Run with the project venv (make deploy-tools): .venv/bin/python tests/template/check_template.py
[TEMPLATE] (default: the repository's template.yaml).
"""

import copy
import json
import os
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The translator wants a region for pseudo parameters; nothing here talks to AWS.
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

from samcli.yamlhelper import yaml_parse  # noqa: E402
from samtranslator.metrics.metrics import Metrics  # noqa: E402
from samtranslator.parser.parser import Parser  # noqa: E402
from samtranslator.public.exceptions import InvalidDocumentException  # noqa: E402
from samtranslator.translator.translator import Translator  # noqa: E402

FAILURES = []
CHECKED = []
# The functions that write the lake (one lease) and the ones that only read it.
WRITERS = ["MaterializerFunction", "MaintenanceFunction"]
QUERY_FUNCTIONS = ["GraphqlFunction", "TelemetryGraphqlFunction", "FetchGraphqlFunction", "FetchFunction"]
GRAPHQL_FUNCTIONS = QUERY_FUNCTIONS[:3]
STAGE_DIMENSION = {"Name": "Stage", "Value": {"Ref": "Stage"}}


def check(ok, what):
    CHECKED.append(what)
    if not ok:
        FAILURES.append(what)
    return ok


class ManagedPolicies(dict):
    """Managed-policy name -> ARN without calling IAM (the ARN's shape is all SAM needs)."""

    def __missing__(self, name):
        return f"arn:aws:iam::aws:policy/{name}"


def translate(sam, values=None):
    sam = copy.deepcopy(sam)
    # Local artifact paths are uploaded by `sam package`; the translator only accepts S3 URIs.
    sam["Globals"]["Function"]["CodeUri"] = "s3://bucket/code.zip"
    for res in sam["Resources"].values():
        if res["Type"] == "AWS::Serverless::LayerVersion":
            res["Properties"]["ContentUri"] = "s3://bucket/layer.zip"
    # The translator's usage metrics go to a no-op publisher (nothing leaves the machine).
    metrics = Metrics()
    try:
        return Translator(managed_policy_map=None, sam_parser=Parser(), plugins=[], metrics=metrics).translate(
            sam_template=sam, parameter_values=values or {}, get_managed_policy_map=ManagedPolicies
        )
    except InvalidDocumentException as e:
        sys.exit(f"the template does not translate: {e} {[str(c) for c in e.causes]}")
    finally:
        metrics.publish()


def of_type(resources, kind):
    return {k: v for k, v in resources.items() if v["Type"] == kind}


def props(res):
    return res.get("Properties", {})


def get_att(value, attr):
    """The logical id of `{"Fn::GetAtt": [id, attr]}`, else None."""
    if isinstance(value, dict) and list(value) == ["Fn::GetAtt"]:
        ident, got = value["Fn::GetAtt"]
        if got == attr:
            return ident
    return None


def ref(value):
    if isinstance(value, dict) and list(value) == ["Ref"]:
        return value["Ref"]
    return None


def refs_in(value):
    """Every Ref target and GetAtt resource inside `value`."""
    out = set()
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "Ref" and isinstance(v, str):
                out.add(v)
            elif k == "Fn::GetAtt" and isinstance(v, list):
                out.add(v[0])
            else:
                out |= refs_in(v)
    elif isinstance(value, list):
        for v in value:
            out |= refs_in(v)
    return out


def condition_on_parameter(template, condition, parameter):
    """True when `condition` is `parameter` compared with "" and negated (set = true)."""
    expr = template.get("Conditions", {}).get(condition)
    return expr == {"Fn::Not": [{"Fn::Equals": [{"Ref": parameter}, ""]}]}


def statements(role):
    for policy in props(role).get("Policies", []):
        # Conditional policies are Fn::If [cond, policy, NoValue].
        if "Fn::If" in policy:
            policy = policy["Fn::If"][1]
        if "PolicyDocument" not in policy:
            continue
        for st in policy["PolicyDocument"]["Statement"]:
            yield policy["PolicyName"], st


def actions(st):
    a = st.get("Action", [])
    return [a] if isinstance(a, str) else a


def env_of(res, fn):
    return props(res.get(fn, {})).get("Environment", {}).get("Variables", {})


def role_of(res, fn):
    """The logical id of the IAM role a function runs with (generated or shared)."""
    return get_att(props(res.get(fn, {})).get("Role"), "Arn")


def check_materializer_failure_handling(t, res):
    queues = of_type(res, "AWS::SQS::Queue")
    rule = res.get("MaterializerFunctionSchedule")
    if not check(rule, "the materializer schedule rule MaterializerFunctionSchedule exists"):
        return None
    targets = props(rule).get("Targets", [])
    if not check(len(targets) == 1, "the materializer schedule rule has one target"):
        return None
    target = targets[0]
    dlq = get_att(target.get("DeadLetterConfig", {}).get("Arn"), "Arn")
    check(dlq in queues, "the schedule target has an SQS DeadLetterConfig")
    retry = target.get("RetryPolicy", {})
    check(
        "MaximumRetryAttempts" in retry and "MaximumEventAgeInSeconds" in retry,
        "the schedule target has a RetryPolicy (attempts and event age)",
    )
    invoke = [
        v for v in of_type(res, "AWS::Lambda::EventInvokeConfig").values()
        if ref(props(v).get("FunctionName")) == "MaterializerFunction"
    ]
    on_failure = None
    if check(len(invoke) == 1, "the materializer has an EventInvokeConfig"):
        dest = props(invoke[0]).get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
        on_failure = get_att(dest, "Arn")
        check(on_failure in queues, "the materializer's async on-failure destination is an SQS queue")
    role = res["MaterializerFunctionRole"]
    for queue in {dlq, on_failure} & set(queues):
        check(
            any(
                "sqs:SendMessage" in actions(st) and get_att(st.get("Resource"), "Arn") == queue
                for _, st in statements(role)
            ),
            f"the materializer role may send to its on-failure queue {queue}",
        )
        alarms = [
            a for a in of_type(res, "AWS::CloudWatch::Alarm").values()
            if props(a).get("Namespace") == "AWS/SQS"
            and props(a).get("MetricName") == "ApproximateNumberOfMessagesVisible"
            and any(get_att(d.get("Value"), "QueueName") == queue for d in props(a).get("Dimensions", []))
        ]
        check(alarms, f"an alarm watches the visible messages of {queue}")
    if dlq in queues:
        policies = [
            p for p in of_type(res, "AWS::SQS::QueuePolicy").values()
            if dlq in refs_in(props(p).get("Queues"))
        ]
        check(
            any(
                st.get("Principal") == {"Service": "events.amazonaws.com"}
                and "sqs:SendMessage" in actions(st)
                and get_att(st.get("Resource"), "Arn") == dlq
                for p in policies
                for st in props(p)["PolicyDocument"]["Statement"]
            ),
            "a queue policy lets EventBridge deliver dead letters to the schedule's queue",
        )
    return dlq


SHARD_INDEXES = range(4)  # MaterializerShardCount allows 1, 2 or 4


def shard_condition_holds(t, cond, index, also=None):
    """True when Condition `cond` is "shard `index` exists" (and `also`, when given): shard 1
    with 2 or 4 shards, shards 2 and 3 with 4; shard 0 always."""
    conditions = t.get("Conditions", {})
    expr = conditions.get(cond)
    if also:
        if not (isinstance(expr, dict) and "Fn::And" in expr):
            return False
        parts = expr["Fn::And"]
        if {"Condition": also} not in parts or len(parts) != 2:
            return False
        other = [p for p in parts if p != {"Condition": also}][0]
        return shard_condition_holds(t, other.get("Condition"), index)
    count = {"Ref": "MaterializerShardCount"}
    if index == 1:
        return expr == {"Fn::Not": [{"Fn::Equals": [count, "1"]}]}
    return expr == {"Fn::Equals": [count, "4"]}


def shard_rules(res, function, action):
    """{shard index: [(rule name, rule, target)]} of the rules invoking `function` with `action`."""
    found = {}
    for name, rule in of_type(res, "AWS::Events::Rule").items():
        for target in props(rule).get("Targets", []):
            if get_att(target.get("Arn"), "Arn") != function:
                continue
            payload = json.loads(target.get("Input", "{}"))
            if payload.get("action") == action:
                found.setdefault(payload.get("shard"), []).append((name, rule, target, payload))
    return found


def check_rule_permission(res, name, cond, what):
    perms = [
        p for p in of_type(res, "AWS::Lambda::Permission").values()
        if get_att(props(p).get("SourceArn"), "Arn") == name
        and props(p).get("Principal") == "events.amazonaws.com"
    ]
    check(len(perms) == 1 and perms[0].get("Condition") == cond, what)


def check_prune_schedule(t, res, dlq):
    expected = json.loads((ROOT / "events/materializer-prune.json").read_text())["action"]
    rules = shard_rules(res, "MaintenanceFunction", expected)
    check(set(rules) == set(SHARD_INDEXES),
          f"the prune rules name shards {list(SHARD_INDEXES)} (got {sorted(map(str, rules))})")
    check(
        all(ref(env_of(res, fn).get("LAKE_DECODED_RETENTION")) == "DecodedRetention" for fn in WRITERS),
        "LAKE_DECODED_RETENTION is DecodedRetention on the drain and maintenance functions",
    )
    for index, found in sorted(rules.items(), key=lambda kv: str(kv[0])):
        if not check(len(found) == 1, f"one EventBridge rule prunes shard {index}"):
            continue
        name, rule, target, payload = found[0]
        cond = rule.get("Condition")
        if index == 0:
            check(
                cond and condition_on_parameter(t, cond, "DecodedRetention"),
                "the prune rule of shard 0 exists only when DecodedRetention is set (Condition)",
            )
        else:
            check(
                cond and shard_condition_holds(t, cond, index, also="HasDecodedRetention"),
                f"the prune rule of shard {index} exists only with DecodedRetention and that shard",
            )
        check(
            "retention" not in payload,
            "the prune payload leaves the retention to LAKE_DECODED_RETENTION (one setting)",
        )
        check(
            get_att(target.get("DeadLetterConfig", {}).get("Arn"), "Arn") == dlq and dlq,
            f"the prune target of shard {index} has the dead-letter queue too",
        )
        check_rule_permission(
            res, name, cond,
            f"EventBridge may invoke the maintenance function for the prune rule of shard {index}, "
            "under the same Condition",
        )


def check_shards(t, res, dlq):
    """One schedule rule per shard, each tick naming its shard; the writers know the count."""
    rules = shard_rules(res, "MaterializerFunction", "materialize")
    check(set(rules) == set(SHARD_INDEXES),
          f"the materialize ticks name shards {list(SHARD_INDEXES)} (got {sorted(map(str, rules))})")
    for index, found in rules.items():
        if not check(len(found) == 1, f"one schedule rule ticks shard {index}"):
            continue
        name, rule, target, _ = found[0]
        schedule = props(rule).get("ScheduleExpression")
        check(ref(schedule) == "MaterializerSchedule", f"shard {index} ticks on MaterializerSchedule")
        check(get_att(target.get("DeadLetterConfig", {}).get("Arn"), "Arn") == dlq and dlq,
              f"the tick of shard {index} has the dead-letter queue")
        check("RetryPolicy" in target, f"the tick of shard {index} has a RetryPolicy")
        if index == 0:
            continue
        cond = rule.get("Condition")
        check(cond and shard_condition_holds(t, cond, index),
              f"the tick of shard {index} exists only when MaterializerShardCount has that shard")
        check_rule_permission(res, name, cond,
                              f"EventBridge may invoke the materializer for shard {index}, under the same Condition")
    allowed = t["Parameters"].get("MaterializerShardCount", {}).get("AllowedValues")
    check(allowed == ["1", "2", "4"], f"MaterializerShardCount allows 1, 2 or 4 (got {allowed})")
    for fn in WRITERS:
        env = env_of(res, fn)
        check(ref(env.get("MATERIALIZER_SHARD_COUNT")) == "MaterializerShardCount"
              and env.get("MATERIALIZER_SHARD_INDEX") == "0",
              f"{fn} knows the shard count (requests name their shard; 0 otherwise)")


def cors_variants(cors):
    """The CORS configurations an API body may take ([one] or both branches of an Fn::If)."""
    if isinstance(cors, dict) and "Fn::If" in cors:
        return cors["Fn::If"][0], cors["Fn::If"][1:]
    return None, [cors]


def check_cors(t, res):
    params = t["Parameters"]

    def api_cors(api):
        return props(res[api]).get("Body", {}).get("x-amazon-apigateway-cors")

    _, telemetry = cors_variants(api_cors("TelemetryApi"))
    check(
        telemetry != [None] and all(c.get("allowOrigins") == ["*"] for c in telemetry),
        "TelemetryApi allows origin * (as telemetry-api did)",
    )
    for api, param, default in [("QueryApi", "DqCorsAllowOrigins", "*"), ("FetchGraphqlApi", "FetchCorsAllowOrigins", None)]:
        cond, variants = cors_variants(api_cors(api))
        if not check(param in params, f"parameter {param} exists"):
            continue
        if default is not None:
            check(params[param].get("Default") == default, f"{param} defaults to {default}")
        else:
            origins = params[param].get("Default", "").split(",")
            check(
                all(o.startswith("https://") for o in origins),
                f"{param} defaults to explicit https origins (fetch-api's apps), not *",
            )
        # The translator resolved the parameter's default into the body: the origins must be a
        # list (one string would be one malformed origin) built from the parameter.
        value = params[param].get("Default", "")
        want = value.split(",")
        if cond:
            any_origin = t["Conditions"].get(cond) == {"Fn::Equals": [{"Ref": param}, "*"]}
            check(any_origin and variants[0].get("allowOrigins") == ["*"], f"{api}: the * branch allows *")
            check(
                variants[1].get("allowOrigins") == {"Fn::Split": [",", value]},
                f"{api}: the other branch splits {param} into a list of origins",
            )
        else:
            check(variants[0] and variants[0].get("allowOrigins") == want, f"{api} allows the origins of {param}")
        for v in variants:
            check(
                v and "authorization" in [h.lower() for h in v.get("allowHeaders", [])],
                f"{api} CORS allows the Authorization header",
            )


def check_lease_table(res):
    table = props(res["LeaseTable"])
    check(
        table.get("PointInTimeRecoverySpecification", {}).get("PointInTimeRecoveryEnabled") is True,
        "LeaseTable has point-in-time recovery",
    )


def check_list_bucket_scoped(res):
    """Listing the lake bucket is scoped to the lake prefix. The blob bucket's ListBucket (no
    function lists blobs) must stay unconditioned: it is what turns a missing blob's GetObject
    into a 404, and GetObject carries no s3:prefix to match a condition."""
    lake = {"Fn::Sub": "arn:${AWS::Partition}:s3:::${LakeBucketName}"}
    blob = {"Fn::Sub": "arn:${AWS::Partition}:s3:::${BlobBucketName}"}
    listers = 0
    for name, role in of_type(res, "AWS::IAM::Role").items():
        lists_lake = False
        for policy, st in statements(role):
            if not any(a in ("s3:ListBucket", "s3:*", "*") for a in actions(st)):
                continue
            where = f"{name}/{policy} ({st.get('Sid')})"
            bucket = st.get("Resource")
            if bucket == blob:
                check("Condition" not in st, f"{where}: the blob bucket's 404 grant has no condition")
                continue
            check(bucket == lake, f"{where}: s3:ListBucket names one bucket, the lake's")
            prefix = st.get("Condition", {}).get("StringLike", {}).get("s3:prefix")
            check(
                prefix == {"Fn::Sub": "${LakeDataPrefix}*"},
                f"{where}: s3:ListBucket on the lake is scoped by s3:prefix to LakeDataPrefix",
            )
            lists_lake = True
        listers += lists_lake
    check(listers >= 2, "the materializer and query roles may list the lake prefix (DuckDB globbing)")


def check_apis(t, res):
    apis = of_type(res, "AWS::ApiGatewayV2::Api")
    stages = of_type(res, "AWS::ApiGatewayV2::Stage")
    log_groups = of_type(res, "AWS::Logs::LogGroup")
    alarms = of_type(res, "AWS::CloudWatch::Alarm").values()
    check(len(apis) == 4, f"four HTTP APIs (got {sorted(apis)})")
    seen_groups = set()
    for api in apis:
        stage = [s for s in stages.values() if ref(props(s).get("ApiId")) == api]
        if not check(len(stage) == 1, f"{api} has one stage"):
            continue
        sp = props(stage[0])
        logs = sp.get("AccessLogSettings", {})
        group = get_att(logs.get("DestinationArn"), "Arn")
        check(group in log_groups, f"{api} writes access logs to a log group")
        check(group not in seen_groups, f"{api} has its own access log group")
        seen_groups.add(group)
        if group in log_groups:
            check("RetentionInDays" in props(log_groups[group]), f"{api}'s access log group has a retention")
        check("$context.requestId" in logs.get("Format", ""), f"{api}'s access log format has the request id")
        route = sp.get("DefaultRouteSettings", {})
        for key, param in [("ThrottlingBurstLimit", "ApiThrottlingBurstLimit"), ("ThrottlingRateLimit", "ApiThrottlingRateLimit")]:
            check(
                param in t["Parameters"] and param in refs_in(route.get(key)),
                f"{api}'s default route {key} comes from parameter {param}",
            )

        def alarm_on(metric):
            return [
                a for a in alarms
                if props(a).get("Namespace") == "AWS/ApiGateway"
                and props(a).get("MetricName") == metric
                and any(d.get("Name") == "ApiId" and ref(d.get("Value")) == api for d in props(a).get("Dimensions", []))
                and any(d.get("Name") == "Stage" for d in props(a).get("Dimensions", []))
            ]

        check(alarm_on("5xx"), f"an alarm watches {api}'s 5xx")
        check(alarm_on("Latency"), f"an alarm watches {api}'s Latency")


def check_reserved_concurrency(t, res):
    functions = of_type(res, "AWS::Lambda::Function")
    check(
        props(functions.get("MaintenanceFunction", {})).get("ReservedConcurrentExecutions") == 1,
        "MaintenanceFunction keeps reserved concurrency 1 (one maintenance action at a time)",
    )
    check(
        ref(props(functions.get("MaterializerFunction", {})).get("ReservedConcurrentExecutions"))
        == "MaterializerShardCount",
        "MaterializerFunction reserves one execution per shard (one drain per shard at a time)",
    )
    query = [f for f in functions if f not in WRITERS]
    check(query == QUERY_FUNCTIONS, f"the query functions are {QUERY_FUNCTIONS} (got {query})")
    for fn in query:
        rc = props(functions[fn]).get("ReservedConcurrentExecutions")
        ok = isinstance(rc, dict) and "Fn::If" in rc
        if check(ok, f"{fn}: ReservedConcurrentExecutions is conditional on a parameter"):
            cond, then, other = rc["Fn::If"]
            param = ref(then)
            check(param in t["Parameters"], f"{fn}: reserved concurrency parameter {param} exists")
            check(t["Parameters"].get(param, {}).get("Default") == "", f"{fn}: {param} defaults to unset")
            check(condition_on_parameter(t, cond, param), f"{fn}: condition {cond} is '{param} is set'")
            check(ref(other) == "AWS::NoValue", f"{fn}: unset {param} means no reservation (AWS::NoValue)")


def walk(value):
    """Every string inside `value` (a translated template or part of it)."""
    if isinstance(value, dict):
        for v in value.values():
            yield from walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from walk(v)
    elif isinstance(value, str):
        yield value


def if_set(value, condition, parameter, t):
    """True when `value` is Fn::If [condition, Ref parameter, AWS::NoValue] and `condition` means
    `parameter` is set."""
    if not (isinstance(value, dict) and list(value) == ["Fn::If"]):
        return False
    cond, then, other = value["Fn::If"]
    return (
        cond == condition
        and condition_on_parameter(t, cond, parameter)
        and ref(then) == parameter
        and ref(other) == "AWS::NoValue"
    )


def inline_statements(res, role):
    """(policy name, statement) of a role's inline policies, both branches of a conditional one."""
    for policy in props(res[role]).get("Policies", []):
        variants = policy["Fn::If"][1:2] if "Fn::If" in policy else [policy]
        for p in variants:
            for st in p.get("PolicyDocument", {}).get("Statement", []):
                yield p.get("PolicyName", "?"), st, policy.get("Fn::If", [None])[0]


def check_secrets(t, res):
    params = t["Parameters"]
    resolved = [s for s in walk(res) if "{{resolve:" in s]
    check(not resolved, f"no dynamic reference ({{{{resolve:...}}}}) anywhere in the template (got {resolved[:2]})")
    check(params.get("QueryCatalogSecretKey", {}).get("Default") == "read_dsn",
          "QueryCatalogSecretKey defaults to read_dsn (query functions use the read-only DSN)")
    desc = params.get("CatalogSecretArn", {}).get("Description", "")
    check('"dsn"' in desc and '"read_dsn"' in desc, "CatalogSecretArn describes the secret JSON (dsn, read_dsn)")
    check('"key"' in params.get("BlobKeySecretArn", {}).get("Description", ""),
          "BlobKeySecretArn describes the secret JSON (key)")
    functions = of_type(res, "AWS::Lambda::Function")
    want_secrets = [{"Ref": "CatalogSecretArn"}, None]
    roles = set()
    for fn in functions:
        env = env_of(res, fn)
        check("BLOB_ENCRYPTION_KEY" not in env, f"{fn}: no BLOB_ENCRYPTION_KEY in the environment")
        check(env.get("DUCKLAKE_CATALOG_DSN", "") == "", f"{fn}: DUCKLAKE_CATALOG_DSN is empty (the DSN comes from the secret)")
        check(ref(env.get("DUCKLAKE_CATALOG_SECRET_ARN")) == "CatalogSecretArn",
              f"{fn}: DUCKLAKE_CATALOG_SECRET_ARN is CatalogSecretArn")
        key = env.get("DUCKLAKE_CATALOG_SECRET_KEY")
        if fn in WRITERS:
            check(key == "dsn" and env.get("DUCKLAKE_READ_ONLY") == "false",
                  f"{fn}: writes with the secret's read-write \"dsn\"")
        else:
            check(ref(key) == "QueryCatalogSecretKey" and env.get("DUCKLAKE_READ_ONLY") == "true",
                  f"{fn}: reads read-only with the secret's QueryCatalogSecretKey field")
        check(ref(env.get("BLOB_ENCRYPTION_KEY_SECRET_ARN")) == "BlobKeySecretArn",
              f"{fn}: BLOB_ENCRYPTION_KEY_SECRET_ARN is BlobKeySecretArn (empty = none)")
        role = role_of(res, fn)
        if check(role in res, f"{fn}: its role is in the template"):
            roles.add(role)
    task_roles = [
        get_att(props(td).get("TaskRoleArn"), "Arn") for td in of_type(res, "AWS::ECS::TaskDefinition").values()
    ]
    for role in sorted(roles) + [r for r in task_roles if r]:
        grants = [(p, st, c) for p, st, c in inline_statements(res, role)
                  if any(a.startswith("secretsmanager:") for a in actions(st))]
        if not check(len(grants) == 1, f"{role}: one statement grants Secrets Manager access"):
            continue
        _, st, cond = grants[0]
        resources = st.get("Resource")
        check(actions(st) == ["secretsmanager:GetSecretValue"] and cond is None,
              f"{role}: the secret grant is GetSecretValue only")
        check(
            isinstance(resources, list) and len(resources) == 2 and resources[0] == want_secrets[0]
            and if_set(resources[1], "HasBlobKey", "BlobKeySecretArn", t),
            f"{role}: GetSecretValue is scoped to CatalogSecretArn and, when set, BlobKeySecretArn",
        )
        kms = [(st, c) for _, st, c in inline_statements(res, role) if "SecretsKmsKeyArn" in refs_in(st)]
        check(
            len(kms) == 1 and kms[0][1] == "HasSecretsKmsKey"
            and condition_on_parameter(t, "HasSecretsKmsKey", "SecretsKmsKeyArn")
            and actions(kms[0][0]) == ["kms:Decrypt"]
            and "kms:ViaService" in kms[0][0].get("Condition", {}).get("StringEquals", {}),
            f"{role}: kms:Decrypt on SecretsKmsKeyArn only when it is set, only via Secrets Manager",
        )
    for role in of_type(res, "AWS::IAM::Role"):
        for policy, st, _ in inline_statements(res, role):
            where = f"{role}/{policy} ({st.get('Sid')})"
            resources = st.get("Resource")
            resources = resources if isinstance(resources, list) else [resources]
            check("*" not in resources, f"{where}: no statement grants on Resource \"*\"")
            check(not any(a == "*" or a.endswith(":*") for a in actions(st)), f"{where}: no wildcard action")


def check_connections(t, res):
    params = t["Parameters"]
    check(str(params.get("QueryPgConnectionLimit", {}).get("Default")) == "2", "QueryPgConnectionLimit defaults to 2")
    check(str(params.get("MaterializerPgConnectionLimit", {}).get("Default")) == "4",
          "MaterializerPgConnectionLimit defaults to 4")
    check(params.get("CatalogProxyHost", {}).get("Default") == "", "CatalogProxyHost defaults to none")
    for fn in of_type(res, "AWS::Lambda::Function"):
        env = env_of(res, fn)
        want = "MaterializerPgConnectionLimit" if fn in WRITERS else "QueryPgConnectionLimit"
        check(ref(env.get("DUCKLAKE_PG_CONNECTION_LIMIT")) == want, f"{fn}: DUCKLAKE_PG_CONNECTION_LIMIT is {want}")
        check(ref(env.get("DUCKLAKE_CATALOG_HOST")) == "CatalogProxyHost",
              f"{fn}: DUCKLAKE_CATALOG_HOST is CatalogProxyHost (empty = the DSN's host)")


def check_maintenance(t, res):
    functions = of_type(res, "AWS::Lambda::Function")
    if not check("MaintenanceFunction" in functions, "a MaintenanceFunction exists"):
        return
    drain, maint = env_of(res, "MaterializerFunction"), env_of(res, "MaintenanceFunction")
    for key in ("MATERIALIZER_LEASE_TABLE", "MATERIALIZER_LEASE_ID", "MATERIALIZER_LEASE_TTL"):
        check(maint.get(key) is not None and maint.get(key) == drain.get(key),
              f"the maintenance function shares the drain's {key}")
    check(drain.get("MATERIALIZER_DRAIN") == "true" and maint.get("MATERIALIZER_DRAIN") == "false",
          "the drain drains (MATERIALIZER_DRAIN true); maintenance does not")
    check(ref(maint.get("MATERIALIZER_LEASE_WAIT")) == "MaintenanceLeaseWait"
          and t["Parameters"].get("MaintenanceLeaseWait", {}).get("Default") == "10m",
          "maintenance waits MaintenanceLeaseWait (default 10m) for the lease")
    check(drain.get("MATERIALIZER_LEASE_WAIT", "0s") == "0s", "the drain never waits for the lease (a tick skips)")
    check(props(functions["MaintenanceFunction"]).get("Timeout") == 900, "maintenance times out at 900 s")
    check(role_of(res, "MaintenanceFunction") == role_of(res, "MaterializerFunction"),
          "maintenance runs with the drain's role (same lake, lease and secrets)")
    sources = [
        name for name, rule in of_type(res, "AWS::Events::Rule").items()
        for target in props(rule).get("Targets", [])
        if get_att(target.get("Arn"), "Arn") == "MaintenanceFunction"
        and json.loads(target.get("Input", "{}")).get("action") != "prune"
    ]
    check(not sources, f"nothing but the prune rule schedules the maintenance function (got {sources})")
    check(
        any(ref(props(a).get("FunctionName")) == "MaintenanceFunction"
            and get_att(props(a).get("DestinationConfig", {}).get("OnFailure", {}).get("Destination"), "Arn")
            == "MaterializerDeadLetterQueue"
            for a in of_type(res, "AWS::Lambda::EventInvokeConfig").values()),
        "a failed scheduled prune goes to the dead-letter queue",
    )


def alarm_metrics(alarm):
    """(namespace, metric, dimensions, stat) of an alarm: its own metric or each MetricStat."""
    p = props(alarm)
    if "MetricName" in p:
        yield p.get("Namespace"), p["MetricName"], p.get("Dimensions", []), p.get("ExtendedStatistic") or p.get("Statistic")
    for m in p.get("Metrics", []):
        if "MetricStat" in m:
            metric = m["MetricStat"]["Metric"]
            yield metric.get("Namespace"), metric.get("MetricName"), metric.get("Dimensions", []), m["MetricStat"].get("Stat")


def fetch_methods():
    proto = (ROOT / "shared/proto/proto/fetch-api.proto").read_text()
    return re.findall(r"^\s*rpc\s+(\w+)\s*\(", proto, re.M)


def check_metrics(t, res):
    functions = of_type(res, "AWS::Lambda::Function")
    for fn in functions:
        env = env_of(res, fn)
        check(ref(env.get("DQ_STAGE")) == "Stage", f"{fn}: DQ_STAGE is the Stage (the metrics' Stage dimension)")
        flag = "MATERIALIZER_EMF" if fn in WRITERS else "QUERY_EMF"
        check(env.get(flag) == "true", f"{fn}: {flag} is true")
    alarms = of_type(res, "AWS::CloudWatch::Alarm")
    for name, alarm in alarms.items():
        for m in props(alarm).get("Metrics", []):
            check("SEARCH" not in str(m.get("Expression", "")), f"{name}: no SEARCH in an alarm expression")
        for ns, metric, dims, _ in alarm_metrics(alarm):
            if ns in ("dq/materializer", "dq/graphql"):
                check(dims == [STAGE_DIMENSION], f"{name}: {metric} is watched for this Stage only")
            if ns == "dq/query":
                check(dims[:1] == [STAGE_DIMENSION], f"{name}: {metric} is watched for this Stage")
    materializer_watched = {m for a in alarms.values() for ns, m, _, _ in alarm_metrics(a) if ns == "dq/materializer"}
    check({"commit_lag_seconds", "raw_rows", "lease_refused", "lease_lost"} <= materializer_watched,
          "the materializer alarms still watch decode lag, poison rate, lease contention and loss")
    refusals = [a for a in alarms.values() if props(a).get("MetricName") == "lease_refused"]
    check(len(refusals) == 1 and props(refusals[0]).get("Period", 0) * props(refusals[0]).get("DatapointsToAlarm", 0) > 900,
          "lease refusals alarm only when they outlast one maintenance action (900 s)")

    def watched(metric, dims, stat=None):
        return [
            n for n, a in alarms.items()
            for ns, m, d, s in alarm_metrics(a)
            if ns == "dq/query" and m == metric and d == dims and (stat is None or s == stat)
        ]

    for fn in QUERY_FUNCTIONS:
        found = watched("latency_ms", [STAGE_DIMENSION, {"Name": "Function", "Value": {"Ref": fn}}], "p99")
        check(found and all(ref(props(alarms[n]).get("Threshold")) == "ApiLatencyThresholdMs" for n in found),
              f"an alarm watches p99 latency_ms of {fn} against ApiLatencyThresholdMs")
    for fn in GRAPHQL_FUNCTIONS:
        dialect = env_of(res, fn).get("GRAPHQL_DIALECT")
        dims = [STAGE_DIMENSION, {"Name": "Dialect", "Value": dialect}, {"Name": "Code", "Value": "INTERNAL_SERVER_ERROR"}]
        check(watched("graphql_errors", dims, "Sum"), f"an alarm watches INTERNAL_SERVER_ERROR graphql_errors of dialect {dialect}")
    methods = fetch_methods()
    check(len(methods) >= 5, f"the FetchService methods are read from the proto (got {methods})")
    for method in methods:
        dims = [STAGE_DIMENSION, {"Name": "Method", "Value": method}, {"Name": "Code", "Value": "INTERNAL"}]
        found = watched("requests", dims, "Sum")
        ok = False
        for n in found:
            # In a metric-math alarm the returned expression must use this method's series.
            p = props(alarms[n])
            if "MetricName" in p:
                ok = True
            ids = [m["Id"] for m in p.get("Metrics", []) if "MetricStat" in m and m["MetricStat"]["Metric"].get("Dimensions") == dims]
            exprs = [m.get("Expression", "") for m in p.get("Metrics", []) if m.get("ReturnData")]
            ok = ok or any(re.search(rf"\b{i}\b", e) for i in ids for e in exprs)
        check(ok, f"an alarm watches FetchService {method} calls answered INTERNAL")
    check_dashboard(res)


def check_dashboard(res):
    boards = of_type(res, "AWS::CloudWatch::Dashboard")
    if not check(len(boards) == 1, "one CloudWatch dashboard"):
        return
    body = props(next(iter(boards.values()))).get("DashboardBody")
    text = body.get("Fn::Sub") if isinstance(body, dict) else body
    if isinstance(text, list):
        text = text[0]
    subs = re.findall(r"\$\{([^}!]+)\}", text)
    known = set(res) | {"Stage", "AWS::Region"}
    check(all(s in known for s in subs), f"the dashboard names only known resources ({sorted(set(subs) - known)})")
    try:
        doc = json.loads(re.sub(r"\$\{([^}]+)\}", r"\1", text))
    except json.JSONDecodeError as e:
        check(False, f"the dashboard body is JSON once substituted: {e}")
        return
    series = []
    for w in doc.get("widgets", []):
        for m in w.get("properties", {}).get("metrics", []):
            series.append(m)
    flat = [json.dumps(m) for m in series]

    def has(*parts):
        return any(all(json.dumps(p)[1:-1] in f for p in parts) for f in flat)

    check(has("dq/materializer", "commit_lag_seconds", "Stage"), "dashboard: decode lag (commit_lag_seconds)")
    check(has("dq/materializer", "raw_rows") and has("dq/materializer", "signal_rows"), "dashboard: throughput (raw_rows, signal_rows)")
    for fn in QUERY_FUNCTIONS:
        for stat in ("p50", "p99"):
            check(has("dq/query", "latency_ms", fn, stat), f"dashboard: {stat} latency_ms of {fn}")
    check(has("graphql_errors", "Dialect", "Code"), "dashboard: graphql_errors by dialect and code")
    check(has("requests", "Method", "Code"), "dashboard: FetchService codes by method")
    for api in of_type(res, "AWS::ApiGatewayV2::Api"):
        check(has("AWS/ApiGateway", "5xx", api), f"dashboard: 5xx of {api}")
    for fn in of_type(res, "AWS::Lambda::Function"):
        check(has("AWS/Lambda", "Errors", fn) and has("AWS/Lambda", "Throttles", fn), f"dashboard: Errors and Throttles of {fn}")


def check_tracing(res):
    for fn, f in of_type(res, "AWS::Lambda::Function").items():
        check(props(f).get("TracingConfig") == {"Mode": "Active"}, f"{fn}: X-Ray active tracing")
        role = role_of(res, fn)
        managed = [str(a) for a in props(res.get(role, {})).get("ManagedPolicyArns", [])]
        check(any(a.endswith("/AWSXrayWriteOnlyAccess") for a in managed), f"{fn}: its role {role} may write X-Ray segments")


def check_provisioned(t, res):
    apis = of_type(res, "AWS::ApiGatewayV2::Api")
    uris = [
        op.get("x-amazon-apigateway-integration", {}).get("uri")
        for api in apis.values()
        for path in props(api).get("Body", {}).get("paths", {}).values()
        for op in path.values()
        if isinstance(op, dict)
    ]
    permissions = [p for p in of_type(res, "AWS::Lambda::Permission").values()
                   if props(p).get("Principal") == "apigateway.amazonaws.com"]
    for fn in QUERY_FUNCTIONS:
        aliases = [n for n, a in of_type(res, "AWS::Lambda::Alias").items() if ref(props(a).get("FunctionName")) == fn]
        if not check(len(aliases) == 1, f"{fn} publishes one alias (AutoPublishAlias)"):
            continue
        alias = aliases[0]
        pc = props(res[alias]).get("ProvisionedConcurrencyConfig")
        ok = isinstance(pc, dict) and "Fn::If" in pc
        if check(ok, f"{fn}: provisioned concurrency is conditional on a parameter"):
            cond, then, other = pc["Fn::If"]
            param = ref(then.get("ProvisionedConcurrentExecutions"))
            check(t["Parameters"].get(param, {}).get("Default") == "" and condition_on_parameter(t, cond, param)
                  and ref(other) == "AWS::NoValue", f"{fn}: {param} (default empty) sets it, else none")
        mine = [u for u in uris if re.search(rf"\$\{{{fn}(Alias\w+)?(\.Arn)?\}}", str(u))]
        check(mine and all(f"${{{alias}}}" in str(u) for u in mine), f"{fn}: every API route invokes the alias {alias}")
        fn_perms = [p for p in permissions if ref(props(p).get("FunctionName")) in (fn, alias)]
        check(fn_perms and all(ref(props(p).get("FunctionName")) == alias for p in fn_perms),
              f"{fn}: API Gateway may invoke the alias, not the unpublished function")


def check_grpc_service(t, res):
    kinds = ["AWS::ECS::Cluster", "AWS::ECS::TaskDefinition", "AWS::ECS::Service",
             "AWS::ElasticLoadBalancingV2::LoadBalancer", "AWS::ElasticLoadBalancingV2::TargetGroup",
             "AWS::ElasticLoadBalancingV2::Listener"]
    found = {k: of_type(res, k) for k in kinds}
    if not check(all(len(v) == 1 for v in found.values()), "one ECS cluster, task definition, service, NLB, target group, listener"):
        return
    check(condition_on_parameter(t, "GrpcServiceEnabled", "GrpcServiceImageUri"),
          "GrpcServiceEnabled means GrpcServiceImageUri is set")
    grpc_resources = {n for v in found.values() for n in v} | {
        n for n, r in res.items() if n.startswith("Grpc")}
    for n in sorted(grpc_resources):
        check(res[n].get("Condition") == "GrpcServiceEnabled", f"{n} exists only with GrpcServiceEnabled")
    lb = props(next(iter(found["AWS::ElasticLoadBalancingV2::LoadBalancer"].values())))
    check(lb.get("Type") == "network" and lb.get("Scheme") == "internal", "the gRPC load balancer is an internal NLB")
    check(ref(lb.get("Subnets")) == "SubnetIds", "the NLB sits in SubnetIds")
    listener = props(next(iter(found["AWS::ElasticLoadBalancingV2::Listener"].values())))
    check(listener.get("Protocol") == "TCP" and listener.get("Port") == 8086, "the NLB listens on TCP 8086 (fetch-api's gRPC port)")
    tg = props(next(iter(found["AWS::ElasticLoadBalancingV2::TargetGroup"].values())))
    attrs = {a["Key"]: a["Value"] for a in tg.get("TargetGroupAttributes", [])}
    check(tg.get("Protocol") == "TCP" and tg.get("Port") == 8086 and tg.get("TargetType") == "ip",
          "the target group forwards TCP 8086 to the tasks' addresses")
    check(attrs.get("preserve_client_ip.enabled") == "true", "the tasks see the caller's address (trusted CIDRs)")
    service = props(next(iter(found["AWS::ECS::Service"].values())))
    net = service.get("NetworkConfiguration", {}).get("AwsvpcConfiguration", {})
    check(service.get("LaunchType") == "FARGATE" and ref(net.get("Subnets")) == "SubnetIds"
          and net.get("AssignPublicIp") == "DISABLED", "the service runs on Fargate in SubnetIds without public addresses")
    td = props(next(iter(found["AWS::ECS::TaskDefinition"].values())))
    containers = td.get("ContainerDefinitions", [])
    if not check(len(containers) == 1, "the task runs one container"):
        return
    c = containers[0]
    check(ref(c.get("Image")) == "GrpcServiceImageUri", "the container runs GrpcServiceImageUri")
    env = {e["Name"]: e["Value"] for e in c.get("Environment", [])}
    check(env.get("FETCH_GRPC_REQUIRE_JWT") == "false" and ref(env.get("FETCH_GRPC_TRUSTED_CIDRS")) == "GrpcTrustedCidrs",
          "tokenless callers are trusted only from GrpcTrustedCidrs (FETCH_GRPC_TRUSTED_CIDRS)")
    check(env.get("HOST_GRPC") == "0.0.0.0" and env.get("PORT_GRPC") == "8086", "fetch listens on 0.0.0.0:8086")
    check("AWS_LAMBDA_RUNTIME_API" not in env, "the container is not a Lambda runtime")
    check(env.get("DUCKLAKE_READ_ONLY") == "true" and ref(env.get("DUCKLAKE_CATALOG_SECRET_KEY")) == "QueryCatalogSecretKey"
          and ref(env.get("DUCKLAKE_PG_CONNECTION_LIMIT")) == "GrpcPgConnectionLimit",
          "the container reads the read-only DSN with its own connection limit")
    check(c.get("LogConfiguration", {}).get("LogDriver") == "awslogs", "the container logs to CloudWatch Logs")
    rules = t.get("Rules", {})
    check(any(
        r.get("RuleCondition") == {"Fn::Not": [{"Fn::Equals": [{"Ref": "GrpcServiceImageUri"}, ""]}]}
        and {"Fn::Not": [{"Fn::Equals": [{"Ref": "GrpcTrustedCidrs"}, ""]}]} in [a.get("Assert") for a in r.get("Assertions", [])]
        for r in rules.values()), "a rule requires GrpcTrustedCidrs when the service is enabled")
    lb_sgs = lb.get("SecurityGroups", [])
    groups = of_type(res, "AWS::EC2::SecurityGroup")
    if check(len(lb_sgs) == 1 and ref(lb_sgs[0]) in groups, "the NLB has its own security group"):
        ingress = props(groups[ref(lb_sgs[0])]).get("SecurityGroupIngress", [])
        check(len(ingress) == 1 and ref(ingress[0].get("CidrIp")) == "GrpcAllowedCidr" and ingress[0].get("FromPort") == 8086
              and ingress[0].get("ToPort") == 8086, "the NLB admits 8086 from GrpcAllowedCidr only")
        task_sg = [n for n in groups if n != ref(lb_sgs[0])]
        check(len(task_sg) == 1 and all(
            ref(i.get("SourceSecurityGroupId")) == ref(lb_sgs[0]) and "CidrIp" not in i
            for i in props(groups[task_sg[0]]).get("SecurityGroupIngress", [])),
            "the tasks admit only the NLB's security group")
    task_role = get_att(td.get("TaskRoleArn"), "Arn")
    if check(task_role in res, "the task has a role"):
        acts = {a for _, st, _ in inline_statements(res, task_role) for a in actions(st)}
        check("s3:GetObject" in acts and not any(a.startswith(("s3:Put", "s3:Delete", "dynamodb:")) for a in acts),
              "the task role only reads (the query functions' grants)")
    docker = ROOT / "deploy/fetch.Dockerfile"
    if check(docker.is_file(), "deploy/fetch.Dockerfile exists"):
        text = docker.read_text()
        check("functions/fetch/bootstrap.zip" in text and "layer/duckdb" in text,
              "the image copies make lambda's fetch bootstrap and the layer's extensions")
        check(re.search(r"^EXPOSE 8086\b", text, re.M) and re.search(r"^ENTRYPOINT .*fetch", text, re.M),
              "the image runs fetch on 8086")


def check_docs(t):
    """docs/deploy.md, the deploy guide, names every parameter."""
    guide = (ROOT / "docs/deploy.md").read_text()
    for param in t["Parameters"]:
        check(re.search(rf"\b{param}\b", guide), f"docs/deploy.md documents parameter {param}")


def check_samconfig(sam, t):
    params = t["Parameters"]
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    for env, sections in config.items():
        if env == "version":
            continue
        overrides = sections.get("deploy", {}).get("parameters", {}).get("parameter_overrides", [])
        if overrides:
            # The environment's values go into the translation too (SAM resolves parameter
            # Refs in API bodies); it must still translate.
            translate(sam, dict(item.partition("=")[::2] for item in overrides))
        for item in overrides:
            key, _, value = item.partition("=")
            if not check(key in params, f"samconfig {env}: {key} is a template parameter"):
                continue
            p = params[key]
            if "AllowedValues" in p:
                check(value in [str(v) for v in p["AllowedValues"]], f"samconfig {env}: {key}={value} is allowed")
            if "AllowedPattern" in p and p["Type"] == "String":
                check(re.fullmatch(p["AllowedPattern"], value), f"samconfig {env}: {key}={value} matches its pattern")


def main():
    # An optional path checks another copy (e.g. a variant with one point removed).
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "template.yaml"
    sam = yaml_parse(path.read_text())
    t = translate(sam)
    res = t["Resources"]
    dlq = check_materializer_failure_handling(t, res)
    check_prune_schedule(t, res, dlq)
    check_shards(t, res, dlq)
    check_cors(t, res)
    check_lease_table(res)
    check_list_bucket_scoped(res)
    check_apis(t, res)
    check_reserved_concurrency(t, res)
    check_secrets(t, res)
    check_connections(t, res)
    check_maintenance(t, res)
    check_metrics(t, res)
    check_tracing(res)
    check_provisioned(t, res)
    check_grpc_service(t, res)
    check_docs(t)
    check_samconfig(sam, t)
    if FAILURES:
        for f in FAILURES:
            print(f"template check failed: {f}", file=sys.stderr)
        print(f"{len(FAILURES)} of {len(CHECKED)} template checks failed", file=sys.stderr)
        sys.exit(1)
    print(f"{path.name}: translated ({len(res)} resources), all {len(CHECKED)} operational checks passed")


if __name__ == "__main__":
    main()
