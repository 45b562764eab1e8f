"""A Flower Grid in this process for the tests: each pushed message is answered at once by a ClientApp with the
node's context (its ``partition-id``), as a SuperNode would; an exception in the ClientApp becomes an error reply."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from uuid import uuid4

from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.supercore.task_identity import TaskIdentity


class LocalGrid:
    """``num_nodes`` nodes (ids 100, 101, ...) with partition-ids 0..num_nodes-1 running ``client_app``."""

    pull_interval = 0.0

    def __init__(self, client_app: ClientApp, num_nodes: int) -> None:
        self.app = client_app
        self.contexts = {100 + p: Context(run_id=1, node_id=100 + p, state=RecordDict(), run_config={},
                                          node_config={"partition-id": p, "num-partitions": num_nodes})
                         for p in range(num_nodes)}
        self.replies: dict[str, Message] = {}
        self.sent: list[Message] = []

    def get_node_ids(self) -> Iterable[int]:
        return list(self.contexts)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = str(uuid4())
            self.sent.append(msg)
            try:
                reply = self.app(msg, self.contexts[msg.metadata.dst_node_id])
            except Exception as e:  # noqa: BLE001 - reported to the server as a SuperNode would
                reply = Message(Error(code=0, reason=f"{type(e).__name__}: {e}"), reply_to=msg)
            self.replies[msg.metadata.message_id] = reply
            ids.append(msg.metadata.message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return [self.replies.pop(i) for i in list(message_ids) if i in self.replies]


@contextmanager
def server_identity(run_id: int = 1) -> Iterator[None]:
    """The process's Flower task identity as a ServerApp's (``Message(...)`` reads it), put back afterwards."""
    saved = TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = run_id, 0, 1
    try:
        yield
    finally:
        TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = saved
