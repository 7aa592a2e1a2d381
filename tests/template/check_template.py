#!/usr/bin/env python3
"""Translates template.yaml to plain CloudFormation with aws-sam-translator (offline) and asserts
the deployment's operational properties on the translated resources: failure handling of the
materializer, the prune schedule, CORS per dialect, point-in-time recovery, prefix-scoped
listing, API access logs and throttling, reserved concurrency of the query functions and the
API alarms. Also checks that every samconfig.toml parameter override names a template parameter
and satisfies its constraints. Exits non-zero with one line per failed check.

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


def check(ok, what):
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


def check_prune_schedule(t, res, dlq):
    expected = json.loads((ROOT / "events/materializer-prune.json").read_text())["action"]
    rules = []
    for name, rule in of_type(res, "AWS::Events::Rule").items():
        for target in props(rule).get("Targets", []):
            if get_att(target.get("Arn"), "Arn") != "MaterializerFunction":
                continue
            payload = json.loads(target.get("Input", "{}"))
            if payload.get("action") == expected:
                rules.append((name, rule, target, payload))
    if not check(len(rules) == 1, "one EventBridge rule invokes the materializer with the prune action"):
        return
    name, rule, target, payload = rules[0]
    cond = rule.get("Condition")
    check(
        cond and condition_on_parameter(t, cond, "DecodedRetention"),
        "the prune rule exists only when DecodedRetention is set (Condition)",
    )
    check(
        "retention" not in payload,
        "the prune payload leaves the retention to LAKE_DECODED_RETENTION (one setting)",
    )
    check(
        ref(props(res["MaterializerFunction"])["Environment"]["Variables"].get("LAKE_DECODED_RETENTION"))
        == "DecodedRetention",
        "LAKE_DECODED_RETENTION is DecodedRetention",
    )
    check(
        get_att(target.get("DeadLetterConfig", {}).get("Arn"), "Arn") == dlq and dlq,
        "the prune target has the dead-letter queue too",
    )
    perms = [
        p for p in of_type(res, "AWS::Lambda::Permission").values()
        if get_att(props(p).get("SourceArn"), "Arn") == name
        and props(p).get("Principal") == "events.amazonaws.com"
    ]
    check(
        len(perms) == 1 and perms[0].get("Condition") == cond,
        "EventBridge may invoke the materializer for the prune rule, under the same Condition",
    )


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
        props(functions.get("MaterializerFunction", {})).get("ReservedConcurrentExecutions") == 1,
        "the materializer keeps reserved concurrency 1 (single writer)",
    )
    query = [f for f in functions if f != "MaterializerFunction"]
    check(len(query) == 4, f"four query functions (got {query})")
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
    check_cors(t, res)
    check_lease_table(res)
    check_list_bucket_scoped(res)
    check_apis(t, res)
    check_reserved_concurrency(t, res)
    check_samconfig(sam, t)
    if FAILURES:
        for f in FAILURES:
            print(f"template check failed: {f}", file=sys.stderr)
        sys.exit(1)
    print(f"{path.name}: translated ({len(res)} resources), every operational check passed")


if __name__ == "__main__":
    main()
