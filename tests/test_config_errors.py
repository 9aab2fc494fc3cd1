"""Config mistakes that used to start a useless daemon or end in a traceback: each is now an error
naming the file and line."""

import pathlib

import pytest

from nodemanager.cli import main
from nodemanager.configuration.config import ConfigError, load, loads

REPO = pathlib.Path(__file__).resolve().parent.parent
SIZE = "[Size small]\ncores = 4\nram_mb = 16000\n"


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        loads(text, "site.ini")
    return [str(p) for p in info.value.problems]


def test_a_misspelt_driver_gets_a_suggestion_at_its_line():
    assert _problems("[Cloud]\ncluster = c\ndriver = ec3\n" + SIZE) == [
        "site.ini:3: [Cloud] driver: unknown driver 'ec3'; did you mean 'ec2'?"]
    assert _problems("[Cloud]\ndriver = tencent\n" + SIZE) == [
        "site.ini:2: [Cloud] driver: unknown driver 'tencent' (known: azure_arm, dummy, ec2, gce, "
        "openstack, simulated)"]


def test_a_real_cloud_needs_an_image_named_where_it_belongs():
    # the section is there without the option: the section's line
    assert _problems("[Cloud]\ndriver = ec2\ncluster = site\n[Cloud Create]\nkey_name = k\n" + SIZE + "price = 0.1\n") == [
        "site.ini:4: [Cloud Create] image: required for driver ec2"]
    # no section at all: the line that chose the driver
    assert _problems("[Daemon]\nmin_nodes = 0\n[Cloud]\ndriver = gce\ncluster = site\n" + SIZE + "price = 0.1\n") == [
        "site.ini:4: [Cloud Create] image: required for driver gce"]
    loads("[Cloud]\ndriver = dummy\n" + SIZE)  # libcloud's dummy cloud needs none


def test_a_missing_matrix_file_names_the_config_line(tmp_path):
    ini = tmp_path / "site.ini"
    ini.write_text("[Daemon]\nmin_nodes = 0\nmatrix = policy.matrix\n" + SIZE)
    with pytest.raises(ConfigError) as info:
        load(str(ini))
    assert str(info.value) == f"{ini}:3: [Daemon] matrix: no such file {tmp_path / 'policy.matrix'}"
    (tmp_path / "policy.matrix").write_text("* | * | * | * -> None\n")
    assert load(str(ini)).matrix_file == str(tmp_path / "policy.matrix")


@pytest.mark.parametrize("address", ["999.1.1.1", "local host", "-bad.example.org", "10.0.0.1/24",
                                     "[::1]", "bad_host.example.org"])
def test_an_unusable_manage_address_is_a_config_error(address):
    assert _problems(f"[Manage]\nport = 8989\naddress = {address}\n") == [
        f"site.ini:3: [Manage] address: expected an IP address or a host name, got {address!r}"]


@pytest.mark.parametrize("address", ["127.0.0.1", "0.0.0.0", "::1", "::", "localhost",
                                     "head-node.example.org", "head01."])
def test_usable_manage_addresses_load(address):
    assert loads(f"[Manage]\naddress = {address}\n").manage.address == address


def test_the_daemon_refuses_a_config_with_no_size(tmp_path, capsys):
    ini = tmp_path / "nm.ini"
    ini.write_text("[Daemon]\nidle_grace = 5m\n[Cloud]\ndriver = simulated\n[Manage]\nport = -1\n")
    assert main(["run", "--config", str(ini)]) == 2
    assert (f"{ini}:4: [Cloud] driver: the simulated cloud needs at least one [Size NAME] section "
            "too: without one nothing is ever booted") in capsys.readouterr().err
    # plan and simulate take sizes from elsewhere; the shipped example has one
    assert loads(ini.read_text()).core.sizes == ()
    assert load(str(REPO / "config.example.ini"), require_sizes=True).core.sizes


def test_the_daemon_reports_a_wrong_driver_before_starting(tmp_path, capsys):
    ini = tmp_path / "nm.ini"
    ini.write_text("[Cloud]\ndriver = ec3\n[Scheduler]\ntype = slurm\n" + SIZE)
    assert main(["run", "--config", str(ini)]) == 2
    err = capsys.readouterr().err
    assert f"{ini}:2: [Cloud] driver: unknown driver 'ec3'; did you mean 'ec2'?" in err
    assert "Traceback" not in err


def test_the_daemon_refuses_a_manage_address_that_does_not_resolve(tmp_path, capsys):
    ini = tmp_path / "nm.ini"
    ini.write_text(SIZE + "[Manage]\nport = 0\naddress = nosuchhost.invalid\n")
    assert main(["run", "--config", str(ini)]) == 2
    assert (f"{ini}:6: [Manage] address: cannot resolve 'nosuchhost.invalid'"
            in capsys.readouterr().err)
    # looked up at start only: plan and a reload do not depend on DNS
    assert load(str(ini)).manage.address == "nosuchhost.invalid"


@pytest.mark.parametrize("option, value, message", [
    ("ram_mb", "9" * 400, "too large (more than 10^15), got '" + "9" * 40 + "'... (400 characters)"),
    ("cores", "9" * 5000, "too large (more than 10^15), got '" + "9" * 40 + "'... (5000 characters)"),
    ("price", "1e999", "too large (more than 10^15), got '1e999'"),
    ("price", "nan", "expected a number, got 'nan'"),
    ("billing_period", "9" * 400, "too large (more than 10^15)"),
], ids=["ram-400-digits", "cores-5000-digits", "price-1e999", "price-nan", "period-400-digits"])
def test_plan_with_a_huge_number_in_the_config_names_the_option(tmp_path, capsys, option, value,
                                                                 message):
    ini = tmp_path / "site.ini"
    sizes = {"cores": "4", "ram_mb": "16000", option: value}
    ini.write_text("[Size small]\n" + "".join(f"{k} = {v}\n" for k, v in sizes.items()))
    line = list(sizes).index(option) + 2
    snapshot = REPO / "docs" / "example-snapshot.json"
    assert main(["plan", "--snapshot", str(snapshot), "--config", str(ini)]) == 1
    err = capsys.readouterr().err
    assert f"{ini}:{line}: [Size small] {option}: {message}" in err and "Traceback" not in err


def test_a_spot_size_the_driver_cannot_buy_is_refused_at_its_line():
    """[Size NAME] market = spot: refused where libcloud cannot buy spot capacity (it
    would boot on-demand VMs at the on-demand price), and a max_price where none is taken."""
    spot = "[Size cheap]\ncores = 4\nram_mb = 16000\nmarket = spot\nprice = 0.1\n"
    azure = "[Cloud]\ndriver = azure_arm\ncluster = site\n[Cloud Create]\nimage = a:b:c\n"
    [problem] = _problems(azure + spot)
    assert problem.startswith("site.ini:9: [Size cheap] market: spot is not offered for driver azure_arm")
    assert "priority/evictionPolicy" in problem
    assert _problems("[Cloud]\ndriver = gce\ncluster = site\n[Cloud Create]\nimage = i\n" + spot + "max_price = 0.1\n") == [
        "site.ini:11: [Size cheap] max_price: driver gce takes no max price for spot capacity"]
    assert _problems("[Cloud]\ndriver = ec2\ncluster = site\n[Cloud Create]\nimage = i\n" + SIZE + "price = 0.1\nmax_price = 0.1\n") == [
        "site.ini:10: [Size small] max_price: only a spot size takes a max_price"]
    assert _problems("[Cloud]\ndriver = dummy\n" + SIZE + "market = reserved\n")[0].startswith(
        "site.ini:6: [Size small] market: expected one of on-demand, spot")
    ec2 = loads("[Cloud]\ndriver = ec2\ncluster = site\n[Cloud Create]\nimage = i\n" + spot + "max_price = 0.1\n")
    assert [(s.market, s.max_price) for s in ec2.core.sizes] == [("spot", 0.1)]
def test_size_offers_are_read_and_a_bad_classad_attribute_names_file_line_and_size():
    size = loads("[Size gpu]\ncores = 8\nram_mb = 32000\ngpus = 2\ngpu_type = a100\n"
                 "features = avx512, gpu\npartitions = gpu, long\nmax_nodes = 4\n"
                 'attributes = HasDocker = true; CUDACapability = 8.0; Note = "a;b"\n',
                 "site.ini").core.sizes[0]
    assert (size.gpus, size.gpu_type, size.features, size.partitions, size.max_nodes) == (
        2, "a100", frozenset({"avx512", "gpu"}), frozenset({"gpu", "long"}), 4)
    assert size.attributes == (("HasDocker", "true"), ("CUDACapability", "8.0"), ("Note", '"a;b"'))
    problems = _problems(SIZE + "[Size gpu]\ncores = 8\nram_mb = 1\n"
                         "attributes = HasDocker = true; CUDACapability = = 8\n")
    assert len(problems) == 1 and problems[0].startswith(
        "site.ini:7: [Size gpu] attributes: CUDACapability: not a valid ClassAd expression")
    assert _problems(SIZE + "[Size gpu]\ncores = 8\nram_mb = 1\nmin_nodes = 3\nmax_nodes = 2\n") == [
        "site.ini:8: [Size gpu] max_nodes: is below min_nodes (3)"]
    assert _problems(SIZE + "[Size gpu]\ncores = 8\nram_mb = 1\nimagee = ami-1\n") == [
        "site.ini:7: [Size gpu] imagee: unknown option; did you mean 'image'?"]
