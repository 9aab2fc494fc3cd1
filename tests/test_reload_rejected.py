"""A rejected reload is loud: SIGHUP with a number that cannot work (a price of 1e-320) is refused
naming file, line and option; the daemon keeps deciding on the old configuration, and until a good
reload the page header is amber with the error, /healthz says so and a metric is 1."""

import signal
import urllib.request

from tests.test_daemon_cli import private_config, running, stops_cleanly


def _get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.read().decode()


def _metric(text, name):
    return [line for line in text.splitlines() if line.startswith(name + " ")]


def test_a_sighup_with_a_number_that_cannot_work_is_refused_and_shown_until_a_good_reload(tmp_path):
    cfg = private_config(tmp_path)
    good = open(cfg).read()
    with running("run", "--config", cfg, ready="status page at") as proc:
        url = proc.wait_for("status page at").split("status page at ")[1].strip()
        assert _metric(_get(url + "/metrics")[1], "nodemanager_config_reload_rejected") == [
            "nodemanager_config_reload_rejected 0.0"]
        bad = good.replace("price = 0.17", "price = 1e-320")
        line = bad.splitlines().index("price = 1e-320") + 1
        with open(cfg, "w") as f:
            f.write(bad)
        proc.p.send_signal(signal.SIGHUP)
        error = f"{cfg}:{line}: [Size small] price: must be from 0.000001 to 1000000, or 0, got '1e-320'"
        proc.wait_for(f"reload rejected, the running configuration stays: {error}", timeout=15)
        proc.seen.clear()
        proc.wait_for("nodemanager.decisions: cycle:")      # still deciding, on the old configuration
        proc.wait_for("nodemanager.decisions: cycle:")
        assert not [s for s in proc.seen if "Traceback" in s or "restart" in s.lower()], proc.seen
        status, health = _get(url + "/healthz")
        assert status == 200 and "reload rejected, the previous configuration runs: " + error in health
        page = _get(url + "/")[1]
        assert "<span class='warn' id='health'>" in page                    # the header turns amber
        assert "id='config-error'>reload rejected, the previous configuration runs: " in page
        assert "[Size small] price: must be from 0.000001 to 1000000" in page
        assert _metric(_get(url + "/metrics")[1], "nodemanager_config_reload_rejected") == [
            "nodemanager_config_reload_rejected 1.0"]

        with open(cfg, "w") as f:
            f.write(good)
        proc.p.send_signal(signal.SIGHUP)
        proc.wait_for("reload: configuration", timeout=15)
        page = _get(url + "/")[1]
        assert "config-error" not in page and "<span class='warn' id='health'>" not in page
        assert "reload rejected" not in _get(url + "/healthz")[1]
        assert _metric(_get(url + "/metrics")[1], "nodemanager_config_reload_rejected") == [
            "nodemanager_config_reload_rejected 0.0"]
        assert stops_cleanly(proc)
