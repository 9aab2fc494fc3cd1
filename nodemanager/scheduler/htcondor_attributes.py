"""What the HTCondor adapter asks the collector for: the partitionable slots' attributes it reads
(HTCondor's draining design's estimates and statistics, the pilots' attributes) and which slots."""

from __future__ import annotations

__all__ = ["PILOT_ATTRIBUTES", "SLOT_ATTRIBUTES", "DEFAULT_CONSTRAINT"]

# what a pilot's .pilot.ad publishes into the slot ad (Sfiligoi et al.) (deploy/htcondor/pilot-ad-cron);
# PilotAdUpdated is the file's modification time, its heartbeat.
PILOT_ATTRIBUTES = ("LAST_JOB_START", "FIRST_EXP_JOB_END", "LAST_EXP_JOB_END", "LAST_MAX_JOB_END",
                    "USED_FRACTION1k", "ADD_UNCOM_TIME1k", "ADD_FINAL_EXP_WASTE1k", "PRIORITY_FACTOR",
                    "CAN_POSTPONE_LAST_JOB", "PilotAdUpdated", "PilotAdCount")

SLOT_ATTRIBUTES = (
    "MyAddress", "Name", "Machine", "State", "Activity", "SlotType", "PartitionableSlot", "DynamicSlot",
    "Cpus", "TotalSlotCpus", "TotalCpus", "Memory", "TotalSlotMemory", "TotalMemory", "NumDynamicSlots",
    "ChildState", "ChildActivity", "JobStarts", "Draining", "DrainReason", "DrainingRequestId",
    "DaemonStartTime", "LastHeardFrom", "EnteredCurrentState", "EnteredCurrentActivity", "MyCurrentTime",
    "MaxJobRetirementTime", "MachineMaxVacateTime",
    "ChildRetirementTimeRemaining",  # each running job's own retirement left (job-dependent MAXJOBRETIREMENTTIME)
    "ReclaimNoticeDeadline",  # the spot reclaim notice relay's attribute
    "NodeManagerKeepRank",    # placement steering's rank (scheduler/htcondor_steer.py)
    "ExpectedMachineGracefulDrainingCompletion", "ExpectedMachineQuickDrainingCompletion",
    "ExpectedMachineGracefulDrainingBadput", "ExpectedMachineQuickDrainingBadput",
    "ExpectedMachineFastDrainingCompletion", "ExpectedMachineFastDrainingBadput",   # the design's names
    "TotalMachineDrainingBadput", "TotalMachineDrainingUnclaimedTime",
    "LastDrainStartTime", "LastDrainStopTime",
    "ChildRemoteOwner", "ChildAccountingGroup", "ChildCpus",  # whose jobs run here (who spent what)
) + PILOT_ATTRIBUTES

DEFAULT_CONSTRAINT = "PartitionableSlot =?= true"
