"""The config file: where it is looked for, what it may say, how flags override it, and bad files."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.cli.main import build_parser
from gputui.config import Config, ConfigError, VerifyConfig, config_path, load_config
from gputui.kube import verify as v

REPO = Path(__file__).resolve().parent.parent

FULL = """
read_only = true

[verify]
image = "registry.local/cuda:12.4.0-base"
namespace = "gpu-checks"
runtime_class = "nvidia"
timeout = 180
resource = "nvidia.com/mig-1g.10gb"
cpu = "250m"
memory = "256Mi"
"""


def _gpu_node() -> dict:
    return {"metadata": {"name": "gpu-1", "labels": {}}, "status": {"allocatable": {"nvidia.com/gpu": "1"}, "capacity": {"nvidia.com/gpu": "1"}}}


def write(tmp_path: Path, text: str, name: str = "config.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_where_the_file_is_looked_for(tmp_path):
    home = {"HOME": "/home/op"}
    assert config_path(None, home) == (Path("/home/op/.config/gputui/config.toml"), False)
    assert config_path(None, {**home, "XDG_CONFIG_HOME": "/xdg"}) == (Path("/xdg/gputui/config.toml"), False)
    assert config_path(None, {**home, "XDG_CONFIG_HOME": "relative/dir"})[0] == Path("/home/op/.config/gputui/config.toml")
    assert config_path(None, {**home, "GPUTUI_CONFIG": "/etc/gputui.toml"}) == (Path("/etc/gputui.toml"), True)
    assert config_path("/mine.toml", {**home, "GPUTUI_CONFIG": "/etc/gputui.toml"}) == (Path("/mine.toml"), True)


def test_absent_default_file_means_defaults(tmp_path):
    config = load_config(None, {"HOME": str(tmp_path)})
    assert config == Config()
    options = config.verify_options()
    assert (options.image, options.timeout, options.read_only, options.resource) == (v.DEFAULT_IMAGE, v.DEFAULT_TIMEOUT, False, None)
    assert (options.cpu, options.memory) == ("100m", "128Mi")


def test_a_full_file_is_read(tmp_path):
    (tmp_path / "gputui").mkdir()
    path = write(tmp_path / "gputui", FULL)
    config = load_config(None, {"HOME": "/nowhere", "XDG_CONFIG_HOME": str(tmp_path)})
    assert config.path == path
    assert config.read_only is True
    assert config.verify == VerifyConfig(
        image="registry.local/cuda:12.4.0-base", namespace="gpu-checks", runtime_class="nvidia", timeout=180.0, resource="nvidia.com/mig-1g.10gb",
        cpu="250m", memory="256Mi",
    )
    options = config.verify_options(count=2)
    assert (options.image, options.runtime_class, options.timeout, options.resource, options.count, options.read_only) == (
        "registry.local/cuda:12.4.0-base", "nvidia", 180.0, "nvidia.com/mig-1g.10gb", 2, True
    )
    assert (options.cpu, options.memory) == ("250m", "256Mi")
    resources = v.plan_for(_gpu_node(), [], "gpu-checks", options).manifest["spec"]["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "250m", "memory": "256Mi"}
    assert (resources["limits"]["cpu"], resources["limits"]["memory"]) == ("250m", "256Mi")


def test_flags_override_the_file(tmp_path):
    config = load_config(str(write(tmp_path, FULL)))
    options = config.verify_options(read_only=False, image="other:1", timeout=5.0, resource="nvidia.com/gpu", runtime_class="kata")
    assert (options.read_only, options.image, options.timeout, options.resource, options.runtime_class) == (False, "other:1", 5.0, "nvidia.com/gpu", "kata")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("read_only = 1", "read_only must be true or false, not 1"),
        ("readonly = true", "unknown setting readonly (known: read_only, exec_timeout, verify, metrics, namespaces, idle, fleet, stuck, health)"),
        ("namespaces = 'ml'", "namespaces must be a list of namespace names (lowercase letters, digits and '-'), not 'ml'"),
        ("namespaces = ['ml', 'Team A']", "namespaces must be a list of namespace names (lowercase letters, digits and '-'), not ['ml', 'Team A']"),
        ("exec_timeout = 0", "exec_timeout must be a number of seconds between 0 and 86400, not 0"),
        ("exec_timeout = '60'", "exec_timeout must be a number of seconds between 0 and 86400, not '60'"),
        ("[verify]\nimag = 'x'", "unknown setting verify.imag (known: verify.image, verify.namespace, verify.runtime_class, verify.timeout, verify.resource, "
                                        "verify.cpu, verify.memory)"),
        ("[verify]\ncpu = '0'", 'verify.cpu must be a quantity above zero such as "100m", not \'0\''),
        ("[verify]\ncpu = 1", 'verify.cpu must be a quantity above zero such as "100m", not 1'),
        ("[verify]\nmemory = '128 MiB'", 'verify.memory must be a quantity above zero such as "128Mi", not \'128 MiB\''),
        ("[verify]\ntimeout = 0", "verify.timeout must be a number of seconds between 0 and 86400, not 0"),
        ("[verify]\ntimeout = '120'", "verify.timeout must be a number of seconds between 0 and 86400, not '120'"),
        ("[verify]\ntimeout = true", "verify.timeout must be a number of seconds between 0 and 86400, not True"),
        ("[verify]\nimage = ''", "verify.image must be a non-empty string without surrounding spaces, not ''"),
        ("[verify]\nnamespace = 3", "verify.namespace must be a non-empty string without surrounding spaces, not 3"),
        ("verify = 'x'", "verify must be a table ([verify]), not 'x'"),
        ("[verify\nimage = 'x'", "not valid TOML: "),
    ],
)
def test_bad_settings_name_the_file_and_the_setting(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(str(path))
    assert str(caught.value).startswith(f"config {path}: {message}")
    assert "\n" not in str(caught.value)


def test_named_files_must_exist_and_be_readable(tmp_path):
    with pytest.raises(ConfigError, match=r"^config .*missing\.toml: no such file$"):
        load_config(str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError, match=r"^config .*missing\.toml: no such file$"):
        load_config(None, {"HOME": str(tmp_path), "GPUTUI_CONFIG": str(tmp_path / "missing.toml")})
    with pytest.raises(ConfigError, match="cannot read it"):
        load_config(str(tmp_path))  # a directory
    (tmp_path / "latin1.toml").write_bytes(b"read_only = false # caf\xe9")
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        load_config(str(tmp_path / "latin1.toml"))


def test_config_and_read_only_flags_before_or_after_the_subcommand():
    parser = build_parser()
    assert (parser.parse_args(["--config", "a.toml", "--read-only", "verify", "n1"]).config, parser.parse_args(["--read-only", "verify", "n1"]).read_only) == ("a.toml", True)
    after = parser.parse_args(["verify", "n1", "--config", "b.toml", "--no-read-only"])
    assert (after.config, after.read_only) == ("b.toml", False)
    neither = parser.parse_args(["verify", "n1"])
    assert (neither.config, neither.read_only) == (None, None)
    app = parser.parse_args(["--read-only"])
    assert (app.command, app.read_only) == (None, True)


def test_the_app_gets_the_file_and_the_flag(tmp_path):
    from gputui.ui.launch import verify_settings

    config = load_config(str(write(tmp_path, FULL)))
    settings = verify_settings(config, None)
    assert (settings.read_only, settings.namespace, settings.options.image) == (True, "gpu-checks", "registry.local/cuda:12.4.0-base")
    assert verify_settings(config, False).read_only is False
    assert verify_settings(Config(), True).read_only is True


def _gputui(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", *args], capture_output=True, text=True, timeout=60, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
    )


def test_a_bad_file_stops_the_app_and_verify_with_one_line_and_exit_2(tmp_path):
    path = write(tmp_path, "[verify]\ntimeout = -1\n")
    expected = f"config {path}: verify.timeout must be a number of seconds between 0 and 86400, not -1"
    app = _gputui("--kubeconfig", str(tmp_path / "none"), env={"GPUTUI_CONFIG": str(path)})
    assert (app.returncode, app.stdout, app.stderr) == (2, "", f"gputui: {expected}\n")
    verify = _gputui("verify", "n1", "--yes", "--config", str(path), env={})
    assert (verify.returncode, verify.stdout, verify.stderr) == (2, "", f"gputui verify: {expected}\n")


def test_read_only_from_the_file_refuses_verify(tmp_path):
    path = write(tmp_path, "read_only = true\n")
    done = _gputui("verify", "n1", "--yes", "--kubeconfig", str(tmp_path / "none"), env={"GPUTUI_CONFIG": str(path)})
    assert done.returncode == 2
    assert done.stderr == "gputui verify: read-only mode: verification creates a pod on each node, so nothing was done\n"


def test_the_defaults_written_twice_agree():
    """config.py repeats the model's defaults (importing those modules would load the client at start)."""
    from gputui import config
    from gputui.kube import credentials, metrics

    assert config.DEFAULT_EXEC_TIMEOUT == credentials.EXEC_TIMEOUT
    assert (config.DEFAULT_METRICS_INTERVAL, config.DEFAULT_READS_PER_MINUTE, config.DEFAULT_CONCURRENCY) == (
        metrics.DEFAULT_BACKGROUND_INTERVAL, metrics.DEFAULT_READS_PER_MINUTE, metrics.DEFAULT_CONCURRENCY)
    assert (config.DEFAULT_VERIFY_IMAGE, config.DEFAULT_VERIFY_TIMEOUT) == (v.DEFAULT_IMAGE, v.DEFAULT_TIMEOUT)
    assert (config.DEFAULT_VERIFY_CPU, config.DEFAULT_VERIFY_MEMORY) == (v.DEFAULT_CPU, v.DEFAULT_MEMORY)
    from gputui.kube import fleet

    assert config.DEFAULT_FLEET_LIVE == fleet.MAX_LIVE


def test_the_fleet_table():
    from gputui.config import ConfigError, parse_config

    parsed = parse_config({"fleet": {"contexts": ["prod-*", "staging", "prod-*"], "live": 3}}).fleet
    assert parsed.contexts == ("prod-*", "staging") and parsed.live == 3
    assert parse_config({}).fleet.contexts == () and parse_config({}).fleet.live == 8
    for bad, words in (({"live": 0}, "fleet.live must be a whole number from 1 to 1000, not 0"),
                       ({"contexts": "prod-*"}, "fleet.contexts must be a list of context names or globs"),
                       ({"contexts": [" a"]}, "fleet.contexts must be a list"),
                       ({"colour": 1}, "fleet.colour"),
                       ({"prometheus": "thanos:9090"}, "fleet.prometheus: expected an http(s):// URL"),
                       ({"cluster_label": "the cluster"}, "fleet.cluster_label must be a Prometheus label name"),
                       ({"cluster_contexts": {"prod": 1}}, "fleet.cluster_contexts must be a table of cluster = \"context\"")):
        with pytest.raises(ConfigError, match=re.escape(words)):
            parse_config({"fleet": bad})
    fleet = parse_config({"fleet": {"prometheus": "https://thanos.example.com", "cluster_label": "k8s_cluster",
                                    "cluster_contexts": {"prod-eu": "gke_acme_prod-eu"}}}).fleet
    assert (fleet.prometheus, fleet.cluster_label, fleet.cluster_contexts) == ("https://thanos.example.com", "k8s_cluster", {"prod-eu": "gke_acme_prod-eu"})
    assert (parse_config({}).fleet.prometheus, parse_config({}).fleet.cluster_label) == (None, "cluster")


def test_exec_timeout_is_read(tmp_path):
    assert load_config(str(write(tmp_path, "exec_timeout = 15"))).exec_timeout == 15.0
    assert load_config(str(write(tmp_path, ""))).exec_timeout == 60.0


def test_namespaces_to_try_are_read(tmp_path):
    config = load_config(str(write(tmp_path, "namespaces = ['ml', 'research', 'ml']")))
    assert config.namespaces == ("ml", "research")  # a repeat is read once
    assert load_config(str(write(tmp_path, "read_only = false", "empty.toml"))).namespaces == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("idle = 3", "idle must be a table ([idle]), not 3"),
        ("[idle]\nwindows = 60", "unknown setting idle.windows (known: idle.window, idle.threshold, idle.prometheus, idle.history)"),
        ("[idle]\nwindow = 5", "idle.window must be a number of seconds between 10 and 604800, not 5"),
        ("[idle]\nwindow = '1h'", "idle.window must be a number of seconds between 10 and 604800, not '1h'"),
        ("[idle]\nthreshold = 0", "idle.threshold must be a percent above 0 and at most 100, not 0"),
        ("[idle]\nthreshold = 101", "idle.threshold must be a percent above 0 and at most 100, not 101"),
        ("[idle]\nprometheus = 'prometheus-k8s'", "idle.prometheus: expected NAMESPACE/SERVICE[:PORT]"),
        ("[idle]\nprometheus = 'Monitoring/prom:9090'", "idle.prometheus: expected NAMESPACE/SERVICE[:PORT]"),
        ("[idle]\nprometheus = 9090", "idle.prometheus: expected a string, not 9090"),
        ("[idle]\nhistory = ''", "idle.history must be a file's path, not ''"),
    ],
)
def test_bad_idle_settings_name_the_setting(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(str(path))
    assert str(caught.value).startswith(f"config {path}: {message}")


def test_idle_settings_are_read_and_flags_override_them(tmp_path):
    from gputui.kube.idle import IdleSettings

    assert load_config(str(write(tmp_path, ""))).idle.settings() == IdleSettings()
    text = "[idle]\nwindow = 600\nthreshold = 2.5\nprometheus = 'monitoring/https:prometheus-k8s:web'\nhistory = '~/idle.sqlite'\n"
    idle = load_config(str(write(tmp_path, text))).idle
    assert idle.settings() == IdleSettings(600.0, 2.5, "monitoring/https:prometheus-k8s:web", "~/idle.sqlite")
    assert idle.settings("http://127.0.0.1:9090", "/tmp/h.sqlite") == IdleSettings(600.0, 2.5, "http://127.0.0.1:9090", "/tmp/h.sqlite")
    assert idle.settings("").prometheus is None  # --prometheus "": none
    assert load_config(str(write(tmp_path, "[idle]\nprometheus = ''\n"))).idle.settings().prometheus is None


def test_prometheus_and_history_flags_before_or_after_report(tmp_path):
    parser = build_parser()
    args = parser.parse_args(["--prometheus", "http://prom:9090", "report", "--history", str(tmp_path / "h")])
    assert (args.prometheus, args.history) == ("http://prom:9090", str(tmp_path / "h"))
    args = parser.parse_args(["report", "--prometheus", "monitoring/prometheus-k8s:9090"])
    assert args.prometheus == "monitoring/prometheus-k8s:9090" and args.history is None
    done = _gputui("report", "--prometheus", "prometheus-k8s", env={"HOME": str(tmp_path)})
    assert done.returncode == 2 and "--prometheus: expected NAMESPACE/SERVICE[:PORT]" in done.stderr


def test_the_idle_defaults_written_twice_agree():
    from gputui import config
    from gputui.kube import idle

    assert (config.DEFAULT_IDLE_WINDOW, config.DEFAULT_IDLE_THRESHOLD, config.DEFAULT_PROMETHEUS) == (
        idle.DEFAULT_WINDOW, idle.DEFAULT_THRESHOLD, idle.DEFAULT_PROMETHEUS)


def test_the_stuck_and_health_thresholds_reach_the_model(tmp_path):
    from gputui.kube.model import ClusterModel
    from gputui.kube.stuck import StuckSettings

    assert load_config(str(write(tmp_path, ""))).model_options()["stuck_settings"] == StuckSettings()
    text = "[stuck]\nmig_after = 600\nupgrade_after = 7200.5\ndomain_after = 120\n[health]\nxid_old_after = 3600\n[metrics]\ninterval = 0\n"
    options = load_config(str(write(tmp_path, text))).model_options()
    assert options["stuck_settings"] == StuckSettings(mig_after=600.0, upgrade_after=7200.5, domain_after=120.0)
    assert options["xid_old_after"] == 3600.0 and options["metrics_background_interval"] == 0.0
    model = ClusterModel(None, **options)  # type: ignore[arg-type]  # never started: no client needed
    assert (model.stuck_settings.mig_after, model.xid_old_after) == (600.0, 3600.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("stuck = 3", "stuck must be a table ([stuck]), not 3"),
        ("[stuck]\nmig = 60", "unknown setting stuck.mig (known: stuck.mig_after, stuck.upgrade_after, stuck.domain_after)"),
        ("[stuck]\nmig_after = 0", "stuck.mig_after must be a number of seconds between 1 and 2592000, not 0"),
        ("[stuck]\nupgrade_after = '1h'", "stuck.upgrade_after must be a number of seconds between 1 and 2592000, not '1h'"),
        ("[health]\nxid_old_after = true", "health.xid_old_after must be a number of seconds between 1 and 2592000, not True"),
        ("[health]\nold_after = 60", "unknown setting health.old_after (known: health.xid_old_after)"),
    ],
)
def test_bad_stuck_and_health_settings_name_the_setting(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(str(path))
    assert str(caught.value).startswith(f"config {path}: {message}")


def test_the_stuck_and_health_defaults_written_twice_agree():
    from gputui import config
    from gputui.kube import health, stuck

    assert (config.DEFAULT_MIG_AFTER, config.DEFAULT_UPGRADE_AFTER, config.DEFAULT_DOMAIN_AFTER, config.DEFAULT_XID_OLD_AFTER) == (
        stuck.DEFAULT_MIG_AFTER, stuck.DEFAULT_UPGRADE_AFTER, stuck.DEFAULT_DOMAIN_AFTER, health.DEFAULT_XID_OLD_AFTER)
