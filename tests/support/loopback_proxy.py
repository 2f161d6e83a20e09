"""A TCP proxy on a loopback port that can drop every connection on demand: the network
between an agent and its Authority failing while both processes keep running. It is the fault
suite's :class:`tests.faults.proxy.Proxy`, said in cut/restore words."""

from __future__ import annotations

from tests.faults.proxy import Proxy


class DroppingProxy(Proxy):
    """Forwards ``127.0.0.1:<port>`` to ``127.0.0.1:<target_port>``.

    :meth:`cut` closes every open connection and, until :meth:`restore`, closes each new one
    as soon as it is accepted (the client sees a reset or an empty reply, never a hang);
    :attr:`drops` counts those.
    """

    def __init__(self, target_port: int) -> None:
        super().__init__(f"proxy→{target_port}", target_port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def is_cut(self) -> bool:
        return self.mode == "drop"

    def cut(self) -> None:
        """Drop every connection now and refuse new ones."""
        self.set_mode("drop")

    def restore(self) -> None:
        """Forward again."""
        self.set_mode("pass")

    async def stop(self) -> None:
        await self.close()
