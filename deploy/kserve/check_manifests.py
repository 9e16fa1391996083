#!/usr/bin/python3
"""Checks deploy/kserve's manifests without a cluster: each document against a JSON Schema of
the part of KServe's CRDs it uses (written here from KServe's API reference for
ServingRuntime/ClusterServingRuntime v1alpha1 and InferenceService v1beta1: field names,
types and enumerations; unknown fields are errors, so a misspelt field fails), then what ties
them to strider: the InferenceService names a runtime that exists and supports its model
format and protocol; the container's arguments are the entrypoint's; its ports are named as
Knative requires (http1 for REST, h2c for gRPC) and match those arguments; the probes and the
Prometheus annotations point at paths `strider serve` answers; every option in
STRIDER_SERVE_ARGS is one `strider serve --help` lists.
Usage: check_manifests.py STRIDER_BINARY [DEPLOY_KSERVE_DIR]   (python3-yaml, python3-jsonschema)
"""
import os
import re
import subprocess
import sys

import jsonschema
import yaml

STRIDER = sys.argv[1]
HERE = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.abspath(__file__))
NAME = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}
QUANTITY = {"oneOf": [{"type": "string", "pattern": r"^[0-9.]+(m|Ki|Mi|Gi|Ti|k|M|G|T)?$"}, {"type": "number"}]}
RESOURCES = {"type": "object", "additionalProperties": False, "properties": {
    "requests": {"type": "object", "additionalProperties": QUANTITY},
    "limits": {"type": "object", "additionalProperties": QUANTITY}}}
PROBE = {"type": "object", "additionalProperties": False, "properties": {
    "httpGet": {"type": "object", "additionalProperties": False, "required": ["path", "port"],
                "properties": {"path": {"type": "string"}, "port": {"type": ["integer", "string"]}}},
    "periodSeconds": {"type": "integer", "minimum": 1}, "initialDelaySeconds": {"type": "integer", "minimum": 0},
    "timeoutSeconds": {"type": "integer", "minimum": 1}, "failureThreshold": {"type": "integer", "minimum": 1}}}
CONTAINER = {"type": "object", "additionalProperties": False, "required": ["name", "image"], "properties": {
    "name": {"const": "kserve-container"},  # the name KServe looks for
    "image": {"type": "string", "minLength": 1},
    "args": {"type": "array", "items": {"type": "string"}},
    "command": {"type": "array", "items": {"type": "string"}},
    "env": {"type": "array", "items": {"type": "object", "additionalProperties": False, "required": ["name"],
                                        "properties": {"name": {"type": "string"}, "value": {"type": "string"}}}},
    "ports": {"type": "array", "maxItems": 1, "items": {  # Knative: one port
        "type": "object", "additionalProperties": False, "required": ["containerPort"], "properties": {
            "name": {"enum": ["http1", "h2c"]}, "containerPort": {"type": "integer", "minimum": 1, "maximum": 65535},
            "protocol": {"enum": ["TCP", "UDP", "SCTP"]}}}},
    "readinessProbe": PROBE, "livenessProbe": PROBE, "resources": RESOURCES}}
PROTOCOLS = {"enum": ["v1", "v2", "grpc-v1", "grpc-v2"]}
RUNTIME = {"type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "additionalProperties": False,
           "properties": {
    "apiVersion": {"const": "serving.kserve.io/v1alpha1"},
    "kind": {"enum": ["ClusterServingRuntime", "ServingRuntime"]},
    "metadata": {"type": "object", "required": ["name"], "properties": {"name": NAME}},
    "spec": {"type": "object", "required": ["supportedModelFormats", "containers"], "additionalProperties": False,
             "properties": {
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "supportedModelFormats": {"type": "array", "minItems": 1, "items": {
            "type": "object", "additionalProperties": False, "required": ["name"], "properties": {
                "name": {"type": "string"}, "version": {"type": "string"}, "autoSelect": {"type": "boolean"},
                "priority": {"type": "integer", "minimum": 1}}}},
        "protocolVersions": {"type": "array", "items": PROTOCOLS},
        "multiModel": {"type": "boolean"}, "disabled": {"type": "boolean"},
        "nodeSelector": {"type": "object"}, "tolerations": {"type": "array"},
        "containers": {"type": "array", "minItems": 1, "items": CONTAINER}}}}}
ISVC = {"type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "additionalProperties": False,
        "properties": {
    "apiVersion": {"const": "serving.kserve.io/v1beta1"},
    "kind": {"const": "InferenceService"},
    "metadata": {"type": "object", "required": ["name"], "properties": {
        "name": NAME, "annotations": {"type": "object", "additionalProperties": {"type": "string"}}}},
    "spec": {"type": "object", "required": ["predictor"], "additionalProperties": False, "properties": {
        "predictor": {"type": "object", "required": ["model"], "additionalProperties": False, "properties": {
            "minReplicas": {"type": "integer", "minimum": 0}, "maxReplicas": {"type": "integer", "minimum": 0},
            "scaleMetric": {"enum": ["cpu", "memory", "concurrency", "rps"]},
            "scaleTarget": {"type": "integer", "minimum": 1},
            "containerConcurrency": {"type": "integer", "minimum": 0}, "timeout": {"type": "integer", "minimum": 1},
            "model": {"type": "object", "required": ["modelFormat", "storageUri"], "additionalProperties": False,
                      "properties": {
                "modelFormat": {"type": "object", "required": ["name"], "additionalProperties": False,
                                "properties": {"name": {"type": "string"}, "version": {"type": "string"}}},
                "runtime": NAME, "protocolVersion": PROTOCOLS,
                "storageUri": {"type": "string", "pattern": r"^(s3|gs|pvc|https?|hdfs|webhdfs|oci|hf)://.+"},
                "resources": RESOURCES}}}}}}}}
ENTRYPOINT_ARGS = re.compile(r"^--(model_name|model_dir|http_port|grpc_port)=(.+)$")
SERVED_PATHS = {"/v2/health/ready", "/v2/health/live", "/metrics", "/v2"}
problems = []


def problem(where, what):
    problems.append("%s: %s" % (where, what))


def check_runtime(rt, serve_help):
    where = "%s %s" % (rt["kind"], rt["metadata"]["name"])
    spec = rt["spec"]
    c = spec["containers"][0]
    args = {}
    for a in c.get("args", []):
        m = ENTRYPOINT_ARGS.match(a)
        if not m:
            problem(where, "argument '%s' is not one strider-kserve-entrypoint takes" % a)
        else:
            args[m.group(1)] = m.group(2)
    http, grpc = int(args.get("http_port", 8080)), int(args.get("grpc_port", 8081))
    for port in c.get("ports", []):
        want = {"http1": http, "h2c": grpc}[port["name"]]
        if port["containerPort"] != want:
            problem(where, "port %s is %d, the server listens on %d" % (port["name"], port["containerPort"], want))
        needs = {"http1": "v2", "h2c": "grpc-v2"}[port["name"]]
        if needs not in spec.get("protocolVersions", []):
            problem(where, "port %s but protocolVersions lacks %s" % (port["name"], needs))
    for probe in ("readinessProbe", "livenessProbe"):
        get = c.get(probe, {}).get("httpGet")
        if not get:
            problem(where, "no %s" % probe)
        elif get["path"] not in SERVED_PATHS or int(get["port"]) != http:
            problem(where, "%s %s:%s is not a path strider serves on its HTTP port" % (probe, get["port"], get["path"]))
    notes = spec.get("annotations", {})
    if notes.get("prometheus.kserve.io/path") != "/metrics" or int(notes.get("prometheus.kserve.io/port", -1)) != http:
        problem(where, "Prometheus annotations do not point at /metrics on the HTTP port")
    for env in c.get("env", []):
        if env["name"] == "STRIDER_SERVE_ARGS":
            for option in re.findall(r"(--[a-z][a-z0-9-]*)", env.get("value", "")):
                if option not in serve_help:
                    problem(where, "STRIDER_SERVE_ARGS: 'strider serve' has no option %s" % option)


def check_isvc(isvc, runtimes):
    where = "InferenceService %s" % isvc["metadata"]["name"]
    p = isvc["spec"]["predictor"]
    if p.get("minReplicas", 1) > p.get("maxReplicas", p.get("minReplicas", 1)):
        problem(where, "minReplicas exceeds maxReplicas")
    m = p["model"]
    rt = runtimes.get(m.get("runtime"))
    if rt is None:
        problem(where, "runtime '%s' is not defined here" % m.get("runtime"))
        return
    formats = [f["name"] for f in rt["spec"]["supportedModelFormats"]]
    if m["modelFormat"]["name"] not in formats:
        problem(where, "model format %s not among the runtime's %s" % (m["modelFormat"]["name"], formats))
    if m.get("protocolVersion", "v1") not in rt["spec"].get("protocolVersions", ["v1"]):
        problem(where, "protocol %s not among the runtime's" % m.get("protocolVersion", "v1"))


def main():
    serve_help = subprocess.run([STRIDER, "serve", "--help"], capture_output=True, text=True, check=True).stdout
    runtimes, services, count = {}, [], 0
    for file in sorted(f for f in os.listdir(HERE) if f.endswith(".yaml")):
        for doc in yaml.safe_load_all(open(os.path.join(HERE, file))):
            count += 1
            schema = ISVC if doc.get("kind") == "InferenceService" else RUNTIME
            try:
                jsonschema.validate(doc, schema)
            except jsonschema.ValidationError as e:
                problem(file, "%s at %s" % (e.message, "/".join(str(x) for x in e.absolute_path)))
                continue
            if doc["kind"] == "InferenceService":
                services.append(doc)
            else:
                runtimes[doc["metadata"]["name"]] = doc
                check_runtime(doc, serve_help)
    for isvc in services:
        check_isvc(isvc, runtimes)
    if problems:
        sys.exit("deploy/kserve: %d problems:\n  %s" % (len(problems), "\n  ".join(problems)))
    print("deploy/kserve: %d documents (%d runtimes, %d inference services) pass" % (count, len(runtimes), len(services)))


main()
