#!/bin/bash
# nodemanager boot script for an HTCondor execute VM ([Cloud Create] user_data_file =
# htcondor-node.sh). nodemanager replaces @NODE_NAME@, @SIZE@ and @CLUSTER@ for each VM it boots.
# The image must have HTCondor installed with deploy/htcondor/50-nodemanager-execute.conf and
# deploy/htcondor/pilot-ad-cron in place (docs/quickstart-ec2-htcondor.md). Pairing is by instance
# id: `use feature:CommonCloudAttributesAWS` publishes CloudInstanceID in the slot ad.
set -euo pipefail

CENTRAL_MANAGER=cm.example.org      # your collector (CONDOR_HOST)

hostnamectl set-hostname "@NODE_NAME@"
cat > /etc/condor/config.d/60-nodemanager-boot.conf <<CONF
CONDOR_HOST = $CENTRAL_MANAGER
# the same value as [Cloud] cluster: lets [Scheduler] constraint pick this manager's slots
NodeManagerCluster = "@CLUSTER@"
NodeManagerSize = "@SIZE@"
STARTD_ATTRS = \$(STARTD_ATTRS) NodeManagerCluster NodeManagerSize
CONF
# The pool's token for this execute point (condor_token_create -identity condor@<UID_DOMAIN> on
# the central manager): baked into the image here, or fetched from your secret store.
install -m 0600 /etc/condor/tokens.d/pool.token.image /etc/condor/tokens.d/pool.token
systemctl enable --now condor
