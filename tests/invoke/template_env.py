"""A function's environment as `sam local invoke` builds it: template.yaml's Globals and function
variables with their intrinsics resolved against the parameter defaults (Ref, Sub, If and the
condition functions; a Ref to a resource gives its logical id, as sam local does; GetAtt gives ""),
then the overrides of an `--env-vars` JSON file ({"Parameters": {...}} for every function, or
{"<LogicalId>": {...}} for one). Like sam local, an override only changes a variable the template
declares for that function; unlike sam local, which silently drops the rest, an override no
function declares is an error here (check_env_vars), so a local recipe cannot depend on a setting
the deployment never passes.

Needs the project venv (aws-sam-cli's YAML loader understands the CloudFormation tags).
"""

import json
import pathlib
import re

from samcli.yamlhelper import yaml_parse

NO_VALUE = object()
PSEUDO = {
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "123456789012",
    "AWS::Partition": "aws",
    "AWS::StackName": "dq-local",
    "AWS::URLSuffix": "amazonaws.com",
}


class TemplateEnvError(Exception):
    pass


class Template:
    def __init__(self, path: pathlib.Path):
        self.doc = yaml_parse(path.read_text())
        self.params = {}
        for name, p in self.doc.get("Parameters", {}).items():
            default = p.get("Default", "")
            if p.get("Type") == "CommaDelimitedList" and isinstance(default, str):
                default = [s for s in default.split(",") if s]
            self.params[name] = default if not isinstance(default, (int, float)) else str(default)
        self.resources = self.doc.get("Resources", {})
        self.conditions = self.doc.get("Conditions", {})

    def resolve(self, v):
        if isinstance(v, list):
            return [x for x in (self.resolve(i) for i in v) if x is not NO_VALUE]
        if not isinstance(v, dict):
            return v
        if len(v) != 1:
            return {k: self.resolve(x) for k, x in v.items()}
        (fn, arg), = v.items()
        if fn == "Ref":
            if arg == "AWS::NoValue":
                return NO_VALUE
            if arg in self.params:
                return self.params[arg]
            if arg in PSEUDO:
                return PSEUDO[arg]
            if arg in self.resources:
                return arg
            raise TemplateEnvError(f"Ref to unknown {arg}")
        if fn == "Fn::Sub":
            text, extra = (arg, {}) if isinstance(arg, str) else (arg[0], self.resolve(arg[1]))

            def sub(m):
                name = m.group(1)
                if name in extra:
                    return str(extra[name])
                if "." in name:
                    return ""
                value = self.resolve({"Ref": name})
                return ",".join(value) if isinstance(value, list) else str(value)

            return re.sub(r"\$\{([^}!]+)\}", sub, text)
        if fn == "Fn::If":
            cond, yes, no = arg
            return self.resolve(yes if self.condition(cond) else no)
        if fn == "Fn::Join":
            sep, items = arg
            return sep.join(str(x) for x in self.resolve(items))
        if fn == "Fn::Select":
            index, items = arg
            return self.resolve(items)[int(self.resolve(index))]
        if fn == "Fn::GetAtt":
            return ""
        if fn in ("Fn::Equals", "Fn::Not", "Fn::And", "Fn::Or", "Condition"):
            return self.evaluate(v)
        return {fn: self.resolve(arg)}

    def condition(self, name: str) -> bool:
        if name not in self.conditions:
            raise TemplateEnvError(f"unknown condition {name}")
        return self.evaluate(self.conditions[name])

    def evaluate(self, v) -> bool:
        (fn, arg), = v.items()
        if fn == "Fn::Equals":
            a, b = (self.resolve(x) for x in arg)
            return a == b
        if fn == "Fn::Not":
            return not self.evaluate(arg[0])
        if fn == "Fn::And":
            return all(self.evaluate(x) for x in arg)
        if fn == "Fn::Or":
            return any(self.evaluate(x) for x in arg)
        if fn == "Condition":
            return self.condition(arg)
        raise TemplateEnvError(f"not a condition: {fn}")

    def declared(self, function: str) -> dict:
        """The function's variables (Globals merged), resolved; a NoValue variable is not set."""
        res = self.resources.get(function)
        if res is None or res.get("Type") != "AWS::Serverless::Function":
            raise TemplateEnvError(f"template.yaml has no function {function}")
        merged = dict(self.doc.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {}))
        merged.update(res.get("Properties", {}).get("Environment", {}).get("Variables", {}))
        return {k: self.resolve(v) for k, v in merged.items()}


def functions(template: Template) -> list:
    return [k for k, r in template.resources.items() if r.get("Type") == "AWS::Serverless::Function"]


def check_env_vars(template: Template, env_vars: dict) -> None:
    """sam local's rules, made errors: a `Parameters` variable must be declared by some function
    (sam applies it to the functions that declare it), a function's own variable by that function."""
    names = functions(template)
    declared = {f: template.declared(f) for f in names}
    for scope, values in env_vars.items():
        if scope == "Parameters":
            for key in values:
                if not any(key in d for d in declared.values()):
                    raise TemplateEnvError(f"Parameters.{key} in the --env-vars file is declared by no function "
                                           "in template.yaml: sam local invoke would ignore it")
        elif scope not in declared:
            raise TemplateEnvError(f"{scope} in the --env-vars file is not a function of template.yaml")
        else:
            for key in values:
                if key not in declared[scope]:
                    raise TemplateEnvError(f"{scope}.{key} in the --env-vars file is not declared for {scope} in "
                                           "template.yaml: sam local invoke would ignore it")


def function_env(template: Template, function: str, layers: list, expand) -> dict:
    """The environment of `function` under `layers` (sam local --env-vars JSON documents, applied in
    order, values passed through `expand`), without the runtime's own variables."""
    declared = template.declared(function)
    env = {k: str(v) for k, v in declared.items() if v is not NO_VALUE}
    for layer in layers:
        for scope in ("Parameters", function):
            for key, value in layer.get(scope, {}).items():
                if key in declared:
                    env[key] = expand(str(value))
                elif scope == function:
                    raise TemplateEnvError(f"{function}.{key} is not declared for {function} in template.yaml")
    # Empty means unset: the code reads an empty variable as an absent one.
    return {k: v for k, v in env.items() if v != ""}


def load_env_vars(path: pathlib.Path) -> dict:
    data = json.loads(path.read_text())
    data.pop("//", None)
    return data
