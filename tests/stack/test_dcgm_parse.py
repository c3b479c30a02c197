"""gputui.kube.dcgm: exporter text → per-GPU readings, history, xid-errors."""
from __future__ import annotations

from pathlib import Path

import pytest

from gputui.kube.dcgm import (
    GpuReading,
    MetricsParseError,
    UtilisationHistory,
    parse_metrics,
    reading_value,
    xid_problems,
)

FIXTURES = Path("/work/shared/fixtures/real/dcgm-exporter")
UUID0 = "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"
UUID1 = "GPU-11111111-2222-3333-4444-555555555555"


def readme_sample() -> str:
    # The README elides lines with a literal "..."; a real exporter never prints one.
    lines = (FIXTURES / "readme-curl-metrics-k8s-sample.prom").read_text().splitlines()
    return "\n".join(line for line in lines if line.strip() != "...") + "\n"


def test_readme_sample_gives_one_gpu_with_no_pod():
    [reading] = parse_metrics(readme_sample())
    assert reading.uuid == UUID0
    assert reading.index == 0
    assert reading.pods == () and reading.pod is None
    assert reading.host is None  # this README sample carries no host label
    assert reading.util is None and reading.xid is None


def test_blank_sentinel_and_its_neighbours_are_no_reading():
    for value in (9223372036854775792, 9223372036854775794, 9223372036854775795, 140737488355328.0, 140737488355330.0):
        assert reading_value(value) is None
    assert reading_value(float("nan")) is None
    assert reading_value(0) == 0
    assert reading_value(699.5) == 699.5


def test_sentinel_in_a_read_field_is_none_not_a_number():
    text = readme_sample().replace("DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_GPU_TEMP")
    [reading] = parse_metrics(text)
    assert reading.temp_c is None


OLD_RELEASE = """\
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %%).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="%(u0)s",device="nvidia0",modelName="NVIDIA A100-SXM4-40GB",Hostname="gpu-a",container="main",namespace="ml",pod="train-0"} 87
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="%(u1)s",device="nvidia1",modelName="NVIDIA A100-SXM4-40GB",Hostname="gpu-a",container="",namespace="",pod=""} 0
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="%(u0)s",device="nvidia0",modelName="NVIDIA A100-SXM4-40GB",Hostname="gpu-a",container="main",namespace="ml",pod="train-0"} 30512
DCGM_FI_DEV_FB_USED{gpu="1",UUID="%(u1)s",device="nvidia1",modelName="NVIDIA A100-SXM4-40GB",Hostname="gpu-a",container="",namespace="",pod=""} 0
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="%(u0)s",device="nvidia0",modelName="NVIDIA A100-SXM4-40GB",Hostname="gpu-a",container="main",namespace="ml",pod="train-0"} 10018
# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="%(u0)s",device="nvidia0",modelName="NVIDIA A100-SXM4-40GB",Hostname="gpu-a",container="main",namespace="ml",pod="train-0"} 61
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="%(u0)s",device="nvidia0",modelName="NVIDIA A100-SXM4-40GB",Hostname="gpu-a",container="main",namespace="ml",pod="train-0"} 312.418000
# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.
# TYPE DCGM_FI_DEV_XID_ERRORS gauge
DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="%(u0)s",device="nvidia0",modelName="NVIDIA A100-SXM4-40GB",Hostname="gpu-a",container="main",namespace="ml",pod="train-0"} 0
DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="%(u1)s",device="nvidia1",modelName="NVIDIA A100-SXM4-40GB",Hostname="gpu-a",container="",namespace="",pod=""} 79
""" % {"u0": UUID0, "u1": UUID1}


def test_older_release_with_Hostname_label():
    gpu0, gpu1 = parse_metrics(OLD_RELEASE)
    assert (gpu0.index, gpu0.uuid, gpu0.host, gpu0.model) == (0, UUID0, "gpu-a", "NVIDIA A100-SXM4-40GB")
    assert (gpu0.util, gpu0.fb_used_mib, gpu0.fb_free_mib, gpu0.temp_c, gpu0.power_w) == (87, 30512, 10018, 61, 312.418)
    assert gpu0.pod == "ml/train-0" and gpu0.xid is None
    assert gpu1.pod is None and gpu1.xid == 79 and gpu1.fb_free_mib is None


def test_newer_release_with_hostname_label_and_driver_label():
    text = OLD_RELEASE.replace('Hostname="gpu-a"', 'hostname="gpu-a",DCGM_FI_DRIVER_VERSION="580.95.05"')
    readings = parse_metrics(text)
    assert [r.host for r in readings] == ["gpu-a", "gpu-a"]
    assert {r.driver_version for r in readings} == {"580.95.05"}
    assert readings[0].util == 87


def test_readings_sorted_by_host_then_index():
    text = OLD_RELEASE.replace('gpu="1"', 'gpu="9"').replace(f'UUID="{UUID1}",device="nvidia1",modelName="NVIDIA A100-SXM4-40GB",Hostname="gpu-a"', f'UUID="{UUID1}",device="nvidia1",modelName="NVIDIA A100-SXM4-40GB",Hostname="gpu-0"')
    assert [(r.host, r.index) for r in parse_metrics(text)] == [("gpu-0", 9), ("gpu-a", 0)]


MIG = """\
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="%(u)s",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="1g.10gb",GPU_I_ID="9",Hostname="h",container="c",namespace="a",pod="p1"} 0
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="%(u)s",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="3g.40gb",GPU_I_ID="2",Hostname="h",container="",namespace="",pod=""} 0
# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge
DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="%(u)s",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="1g.10gb",GPU_I_ID="9",Hostname="h",container="c",namespace="a",pod="p1"} 0.734500
DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="%(u)s",modelName="NVIDIA H100 80GB HBM3",GPU_I_PROFILE="3g.40gb",GPU_I_ID="2",Hostname="h",container="",namespace="",pod=""} 0.000000
""" % {"u": UUID0}


def test_mig_instances_use_gr_engine_activity_as_percent():
    big, small = parse_metrics(MIG)
    assert (big.mig_instance, big.mig_profile, big.util) == ("2", "3g.40gb", 0.0)
    assert (small.mig_instance, small.mig_profile, small.util) == ("9", "1g.10gb", 73.45)
    assert small.pod == "a/p1"
    assert small.key != big.key and small.key.startswith(UUID0)


def test_shared_gpu_lists_every_attributed_pod_once():
    text = """\
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="%(u)s",hostname="h",container="c",namespace="a",pod="p1"} 40
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="%(u)s",hostname="h",container="c",namespace="b",pod="p2"} 40
DCGM_FI_DEV_FB_USED{gpu="0",UUID="%(u)s",hostname="h",container="c",namespace="a",pod="p1"} 100
DCGM_FI_DEV_FB_USED{gpu="0",UUID="%(u)s",hostname="h",container="c",namespace="b",pod="p2"} 100
""" % {"u": UUID0}
    [reading] = parse_metrics(text)
    assert reading.pods == ("a/p1", "b/p2")
    assert reading.util == 40 and reading.fb_used_mib == 100


@pytest.mark.parametrize("text", ['DCGM_FI_DEV_GPU_UTIL{gpu="0" 5\n', "<html>403 Forbidden</html>\n", 'x{a="1"} many\n'])
def test_garbage_is_a_one_line_parse_error(text):
    with pytest.raises(MetricsParseError) as info:
        parse_metrics(text)
    assert "\n" not in str(info.value)


def test_empty_text_has_no_gpus():
    assert parse_metrics("") == []


def _reading(**kw) -> GpuReading:
    base = dict(uuid=UUID0, index=0, model=None, host="h", mig_profile=None, mig_instance=None, util=None,
                fb_used_mib=None, fb_free_mib=None, temp_c=None, power_w=None, xid=None, pods=(), driver_version=None)
    return GpuReading(**{**base, **kw})


def test_xid_problems():
    assert xid_problems([_reading(), _reading(index=1, uuid=UUID1)]) == []
    [problem] = xid_problems([_reading(xid=79), _reading(index=3, uuid=UUID1, xid=13)])
    assert problem.code == "xid-errors"
    assert "GPU 0: XID 79 (GPU has fallen off the bus)" in problem.message
    assert "GPU 3: XID 13" in problem.message


def test_xid_problem_from_parsed_text_names_the_gpu():
    [problem] = xid_problems(parse_metrics(OLD_RELEASE))
    assert problem.message == "last XID GPU 1: XID 79 (GPU has fallen off the bus)"


def test_history_is_bounded_per_device_and_in_devices():
    history = UtilisationHistory(samples=3, devices=2)
    for value in (10, 20, None, 30, 40):
        history.record([_reading(util=value)])
    assert history.series(UUID0) == [20, 30, 40]
    history.record([_reading(uuid=UUID1, util=5)])
    history.record([_reading(uuid="GPU-third", util=7)])
    assert len(history) == 2
    assert history.series(UUID0) == []  # least recently updated, forgotten
    assert history.series("GPU-third") == [7]


def test_to_json_has_the_report_fields():
    [_, gpu1] = parse_metrics(OLD_RELEASE)
    assert gpu1.to_json() == {"index": 1, "uuid": UUID1, "model": "NVIDIA A100-SXM4-40GB",
                              "util": 0, "fb_used_mib": 0, "fb_free_mib": None, "temp_c": None, "power_w": None,
                              "xid": 79, "pod": None}


def test_to_json_puts_a_mig_instances_profile_into_the_model():
    mig = _reading(model="NVIDIA H100 80GB HBM3", mig_profile="1g.10gb", mig_instance="9")
    assert mig.to_json()["model"] == "NVIDIA H100 80GB HBM3 MIG 1g.10gb"
    assert set(mig.to_json()) == set(_reading().to_json())
