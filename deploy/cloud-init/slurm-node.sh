#!/bin/bash
# nodemanager boot script for a SLURM compute VM ([Cloud Create] user_data_file = slurm-node.sh).
# nodemanager replaces @NODE_NAME@, @SIZE@ and @CLUSTER@ for each VM it boots, so the VM's slurmd
# registers as exactly the NodeName nodemanager gave it (declared State=FUTURE in
# deploy/slurm/nodemanager.conf). The image must have slurmd and munge installed (Debian/Ubuntu:
# apt-get install slurmd munge) and the pool's munge key, or fetch the key below.
set -euo pipefail

NODE_NAME=@NODE_NAME@
SLURMCTLD=head.example.org          # your slurmctld host (SlurmctldHost in slurm.conf)

hostnamectl set-hostname "$NODE_NAME"

# The pool's munge key: baked into the image here; fetch it from your secret store instead if you
# prefer (it must be identical on every node and the head node).
install -o munge -g munge -m 0400 /etc/munge/munge.key.pool /etc/munge/munge.key
systemctl restart munge

# The instance id, for the status page and for pairing by id (names pair already).
TOKEN=$(curl -fsS -X PUT http://169.254.169.254/latest/api/token \
        -H "X-aws-ec2-metadata-token-ttl-seconds: 300")
INSTANCE_ID=$(curl -fsS -H "X-aws-ec2-metadata-token: $TOKEN" \
              http://169.254.169.254/latest/meta-data/instance-id)
echo "nodemanager: $NODE_NAME is $INSTANCE_ID (size @SIZE@, cluster @CLUSTER@)" | systemd-cat -t nodemanager

# slurmd takes the node name nodemanager chose and its configuration from slurmctld
# ("configless" SLURM: SlurmctldParameters=enable_configless on the head node).
mkdir -p /etc/systemd/system/slurmd.service.d
cat > /etc/systemd/system/slurmd.service.d/nodemanager.conf <<UNIT
[Service]
ExecStart=
ExecStart=/usr/sbin/slurmd -D -s -N $NODE_NAME --conf-server $SLURMCTLD
UNIT
systemctl daemon-reload
systemctl enable --now slurmd
