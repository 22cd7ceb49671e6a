"""The end of a launch on this node, whatever program it ran: the agent's record, not the program's.

A launch ends when its program exits 0, when its time limit comes (RunSpec.max_minutes: the agent stops it) or when
`gantry stop` stops it. Two records keep it ended:

    state_dir/finished-launches.json   a restarted agent (a reboot, a Spot node started again) runs none of them again
    RUN_DIR/ended/node-RANK.json       launch_contract.EndRecord: `gantry status`, `run` and `logs --follow` start no
                                       stopped node for a launch its node ended (gantry.launches.restart_preempted)

The bucket's copy is retried every loop until it is written: a node that cannot reach the bucket at the end still
holds the local record, and the launcher also refuses a launch past its deadline on its own.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

from launch_contract import EndRecord, RunSpec, ended_url

from . import storage
from .metadata import MetadataError


class Endings:
    def __init__(self, state_dir: str, token, storage_url: str, log):
        self.file = os.path.join(state_dir, "finished-launches.json")
        self.token, self.storage_url, self.log = token, storage_url, log
        self.unwritten: dict[str, tuple[str, EndRecord]] = {}  # launch -> (url, record) the bucket does not hold yet
        try:  # read once: this agent is the file's one writer, and the loop asks every turn
            with open(self.file, encoding="utf-8") as f:
                self.finished = set(json.load(f))  # the launches that ended on this node (RunSpec.launch_id)
        except (OSError, ValueError):
            self.finished = set()

    def record(self, spec: RunSpec, reason: str, detail: str) -> None:
        """The launch is over: recorded here at once, and in the bucket (retried by ``flush`` until it is)."""
        self.finished = set(sorted(self.finished | {spec.launch_id})[-100:])
        try:
            os.makedirs(os.path.dirname(self.file), exist_ok=True)
            with open(self.file + ".tmp", "w", encoding="utf-8") as f:
                json.dump(sorted(self.finished), f)
            os.replace(self.file + ".tmp", self.file)
        except OSError as exc:
            self.log(f"could not record the finished run in {self.file}: {exc}")
        if spec.run_dir:
            record = EndRecord(spec.launch_id, spec.node_rank, reason, time.time(), detail)
            self.unwritten[spec.launch_id] = (ended_url(spec.run_dir, spec.node_rank), record)
            self.flush()

    def flush(self) -> None:
        for launch, (url, record) in list(self.unwritten.items()):
            try:
                storage.upload(url, json.dumps(dataclasses.asdict(record)).encode(), self.token, self.storage_url,
                               content_type="application/json", timeout=60)
            except (storage.StorageError, MetadataError, OSError) as exc:
                self.log(f"could not write the end of run {record.launch} to {url}: {exc}; trying again")
                continue
            del self.unwritten[launch]
            self.log(f"recorded the end of the launch in {url} ({record.reason}): no verb starts this node for it "
                     "again")
