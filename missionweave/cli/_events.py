"""``missionweave events …``: read and verify Group logs."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import typer

from ..protocol import SigningKey
from ._common import CliError, existing_db, load_key
from ._options import READER_KEY, READER_KEY_ENV, authority_db_option, env_option

app = typer.Typer(help="Read, follow and verify Group event logs.", no_args_is_help=True)


@app.command("verify")
def verify(
    db: str = authority_db_option("The Authority's SQLite database, or its postgresql:// URL."),
    group: list[str] = typer.Option(
        [], "--group", "-g", help="Group to verify (repeatable). Default: every Group."
    ),
    public_key: str | None = typer.Option(
        None,
        "--public-key",
        help="Pin the Authority public key (base64url). Default: the key recorded in the "
        "database, which proves integrity but not who the Authority is.",
    ),
) -> None:
    """Check every hash link, Authority signature and Command signature, offline.

    Exits 0 when every Group verifies; exits 1 naming the first bad sequence otherwise.
    """
    from ..authority import ChainError, UnknownGroupError, open_reader, verify_log
    from ..authority.core import is_url, redact

    if not is_url(db):
        existing_db(Path(db))
    try:
        store = open_reader(db)
    except Exception as exc:  # psycopg.Error: unreachable server, refused login
        raise CliError(f"cannot open {redact(db)}: {exc}") from None
    db = redact(db)
    try:
        try:
            row = store.one("meta.authority_key")
            groups = group or [r[0] for r in store.all("groups.ids")]
        except sqlite3.DatabaseError as exc:
            raise CliError(f"{db} is not an Authority database ({exc})") from None
        key = public_key or (row[0] if row else None)
        if key is None:
            raise CliError(f"{db} records no Authority key; pass --public-key")
        if not groups:
            raise CliError(f"{db} holds no Group")
        for gid in groups:
            try:
                rep = verify_log(store, gid, key)
            except UnknownGroupError:
                raise CliError(f"no group {gid!r} in {db}") from None
            except ChainError as exc:
                typer.echo(f"FAIL group {gid}: sequence {exc.seq}: {exc.reason}")
                raise typer.Exit(1) from None
            typer.echo(
                f"ok   group {gid}: {rep.events} events, head {rep.head_seq} {rep.head_hash[:16]}…"
            )
    finally:
        store.close()


@app.command("tail")
def tail(
    group: str = typer.Option(..., "--group", "-g", help="The Group to read."),
    url: str = env_option("--authority-url", "--url"),
    after: int = typer.Option(0, "--after", min=0, help="Print Events after this sequence."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new Events."),
    as_json: bool = typer.Option(False, "--json", help="One JSON Event per line."),
    poll_s: float = typer.Option(1.0, "--poll", min=0.05, help="Follow poll interval, seconds."),
    key: Path | None = READER_KEY,
) -> None:
    """Print a Group's Events (one line each), optionally following new ones.

    The reads are signed with --key: the Authority shows a Group's log only to its members.
    """
    if key is None:
        raise CliError(
            f"reads are signed: pass --key (or set {READER_KEY_ENV}) with the PEM key of a "
            "member of the Group; with `dev up`, <data-dir>/keys/coordinator.pem"
        )
    asyncio.run(_tail(group, url, after, follow, as_json, poll_s, load_key(key)))


async def _tail(
    group: str, url: str, after: int, follow: bool, as_json: bool, poll_s: float, key: SigningKey
) -> None:
    from ..authority.client import AuthorityClient, AuthorityRequestError, AuthorityUnavailable

    async with AuthorityClient(url, signing_key=key) as client:
        cursor = after
        while True:
            try:
                events = await client.events(group, after_sequence=cursor, limit=1000)
            except AuthorityUnavailable:
                raise CliError(f"cannot reach the Authority at {url}") from None
            except AuthorityRequestError as exc:
                raise CliError(f"{exc.code}: {exc.reason}") from None
            for ev in events:
                if as_json:
                    typer.echo(ev.model_dump_json())
                else:
                    who = ev.actor or "authority"
                    item = f" [{ev.work_item_id}]" if ev.work_item_id else ""
                    typer.echo(
                        f"{ev.seq:>8} {ev.type:<28} {who}{item} "
                        f"{json.dumps(ev.body, separators=(',', ':'))[:120]}"
                    )
                cursor = ev.seq
            if len(events) == 1000:
                continue
            if not follow:
                return
            await asyncio.sleep(poll_s)
