"""The boot script a VM gets: `[Cloud Create] user_data` / `user_data_file` with the node's name,
size and cluster filled in, as EC2 stores it (libcloud's real EC2 driver against the local EC2
endpoint), so a new VM can join SLURM or HTCondor under the name nodemanager gave it."""

from __future__ import annotations

import base64
import os

import boto3
import pytest

from nodemanager.configuration import config
from nodemanager.cloud.libcloud_driver import LibcloudCloud
from nodemanager.model import Size

pytestmark = pytest.mark.ec2

SCRIPT = """#!/bin/bash
# joins as the node nodemanager named
slurmd -N @NODE_NAME@ --conf "Feature=@SIZE@" # cluster @CLUSTER@
echo "${HOME} {not a placeholder}"
"""


def _user_data(moto_server, instance_id: str) -> str:
    ec2 = boto3.client("ec2", endpoint_url=moto_server.url, region_name="us-east-1",
                       aws_access_key_id="x", aws_secret_access_key="x")
    attr = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")
    return base64.b64decode(attr["UserData"]["Value"]).decode()


def test_user_data_file_reaches_the_vm_with_its_name(moto_server, ec2_cloud, tmp_path):
    script = tmp_path / "boot.sh"
    script.write_text(SCRIPT)
    cloud = ec2_cloud("ud-test", create_args={"user_data_file": str(script)})
    node = cloud.create_node(Size("small", cores=2, ram_mb=4096, instance_type="t3.small"),
                             "ud-test-small-7", {})
    assert _user_data(moto_server, node.id) == (
        "#!/bin/bash\n# joins as the node nodemanager named\n"
        'slurmd -N ud-test-small-7 --conf "Feature=small" # cluster ud-test\n'
        'echo "${HOME} {not a placeholder}"\n')


def test_user_data_file_is_relative_to_the_config_and_must_be_a_small_regular_file(tmp_path):
    (tmp_path / "boot.sh").write_text(SCRIPT)
    ini = tmp_path / "nm.ini"
    ini.write_text("[Cloud]\ndriver = ec2\ncluster = site\nkey = k\nsecret = s\n[Cloud Create]\nimage = ami-1\n"
                   "user_data_file = boot.sh\n[Size small]\ncores = 2\nram_mb = 1000\nprice = 0.1\n")
    settings = config.load(str(ini))
    assert settings.cloud.create_args["user_data_file"] == str(tmp_path / "boot.sh")
    LibcloudCloud(settings.cloud)  # reads and accepts it
    for bad, why in ((tmp_path, "not a regular file"), (tmp_path / "nope.sh", "No such file")):
        ini.write_text(ini.read_text().replace("user_data_file = boot.sh", f"user_data_file = {bad}"))
        with pytest.raises(ValueError, match=why):
            LibcloudCloud(config.load(str(ini)).cloud)
        ini.write_text(ini.read_text().replace(f"user_data_file = {bad}", "user_data_file = boot.sh"))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    ini.write_text(ini.read_text().replace("user_data_file = boot.sh", f"user_data_file = {fifo}"))
    with pytest.raises(ValueError, match="not a regular file"):  # and no hang
        LibcloudCloud(config.load(str(ini)).cloud)
    (tmp_path / "big.sh").write_bytes(b"#" * 20000)
    ini.write_text(ini.read_text().replace(f"user_data_file = {fifo}", "user_data_file = big.sh"))
    with pytest.raises(ValueError, match="over 16384 bytes"):
        LibcloudCloud(config.load(str(ini)).cloud)


def test_a_size_boots_with_its_own_image_boot_script_and_tags(moto_server, ec2_cloud, tmp_path):
    """A GPU size needs another image: [Size NAME] image / user_data_file / tag_* override
    [Cloud Create] for that size only, as the cloud records the VM."""
    (tmp_path / "gpu.sh").write_text("#!/bin/sh\n# gpu node @NODE_NAME@\n")
    ini = tmp_path / "nm.ini"
    ini.write_text("[Size gpu]\ncores = 8\nram_mb = 1000\nprice = 0.1\ngpus = 1\nimage = ami-0gpu0001\n"
                   "user_data_file = gpu.sh\ntag_role = gpu\n[Size cpu]\ncores = 8\nram_mb = 1000\nprice = 0.1\n")
    gpu, cpu = config.load(str(ini)).core.sizes
    cloud = ec2_cloud("size-opts", create_args={"user_data": "#!/bin/sh\n# cpu node\n"})
    ec2 = boto3.client("ec2", endpoint_url=moto_server.url, region_name="us-east-1",
                       aws_access_key_id="x", aws_secret_access_key="x")
    booted = {}
    for size in (gpu, cpu):
        node = cloud.create_node(size, f"size-opts-{size.name}-1", {})
        vm = ec2.describe_instances(InstanceIds=[node.id])["Reservations"][0]["Instances"][0]
        booted[size.name] = (vm["ImageId"], _user_data(moto_server, node.id),
                             {t["Key"]: t["Value"] for t in vm.get("Tags", ())}.get("role"))
    assert booted == {"gpu": ("ami-0gpu0001", "#!/bin/sh\n# gpu node size-opts-gpu-1\n", "gpu"),
                      "cpu": ("ami-12c6146b", "#!/bin/sh\n# cpu node\n", None)}


def test_a_size_with_an_unreadable_boot_script_is_refused_before_anything_starts(tmp_path):
    ini = tmp_path / "nm.ini"
    ini.write_text("[Cloud]\ndriver = ec2\ncluster = site\nkey = k\nsecret = s\n[Cloud Create]\nimage = ami-1\n"
                   "[Size gpu]\ncores = 2\nram_mb = 1000\nprice = 0.1\nuser_data_file = nope.sh\n")
    settings = config.load(str(ini))
    with pytest.raises(ValueError, match=r"\[Size gpu\] user_data_file: .*No such file"):
        LibcloudCloud(settings.cloud, sizes=settings.core.sizes)
