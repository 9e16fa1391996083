"""strider.check and strider.inspect return the figures `strider check --json` and
`strider inspect --json` write."""
import json

import pytest

import strider
from conftest import MODELS, strider_cli

CNN = MODELS / "dynamic" / "SmallCnn_dynamic_batch"
C2F = MODELS / "seed" / "C2f_split_op17" / "model.onnx"


def test_check_reports_what_the_cli_reports(tmp_path):
    report = strider.check(CNN)
    code, _, err = strider_cli("check", CNN, "--json", tmp_path / "report.json")
    assert code == 0, err
    cli = json.loads((tmp_path / "report.json").read_text())
    assert report["passed"] == cli["passed"] == 3 and report["failed"] == 0
    assert report["model_sha256"] == cli["model_sha256"]
    for ours, theirs in zip(report["data_sets"], cli["data_sets"]):
        for a, b in zip(ours["outputs"], theirs["outputs"]):
            assert a["name"] == b["name"] and a["shape"] == b["shape"]
            assert a["max_abs_error"] == b["max_abs_error"] and a["passed"]


def test_check_counts_a_failure():
    report = strider.check(CNN, rtol=0.0, atol=0.0)  # no tolerance: f32 rounding fails some output
    assert report["failed"] > 0 and "first_bad_node" not in report["data_sets"][0]  # expected files, no search


def test_inspect_reports_the_plan_the_cli_prints(tmp_path):
    plan = strider.inspect(C2F, layout="nhwc")
    code, _, err = strider_cli("inspect", C2F, "--layout", "nhwc", "--json", tmp_path / "plan.json")
    assert code == 0, err
    assert plan == json.loads((tmp_path / "plan.json").read_text())
    assert plan["layout"] == "nhwc" and plan["concat_in_place"] >= 1


def test_check_and_inspect_raise_strider_errors():
    with pytest.raises(strider.errors.NotFound):
        strider.check("/no/such/model.onnx")
    with pytest.raises(strider.errors.InvalidArgument):
        strider.inspect(C2F, device="tpu")


def test_winograd_option_reaches_the_cpu_kernels():
    yolo = MODELS / "real" / "YOLOv8ci_128_split_op17" / "model.onnx"
    kernels = {}
    for winograd in (True, False):
        plan = json.dumps(strider.inspect(yolo, layout="nhwc", winograd=winograd))
        kernels[winograd] = plan.count("winograd")
    assert kernels[True] > 0 and kernels[False] == 0, kernels
