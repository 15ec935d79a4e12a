"""A light Streamlit client: one session over the websocket, as the browser's frontend talks to the server.

Used by tests/browser/test_proxy.py and test_proxy_poll.py (sessions through the proxy) and by
benchmarks/bench_classroom.py (how many students a server holds), as tests/crowd_support.py is by bench_crowd.py.

No browser and no JavaScript: Streamlit's own protocol (the protobufs in `streamlit.proto`) on
`ws://HOST:PORT/_stcore/stream`, so one process holds dozens of sessions, doing what Streamlit 1.67's frontend does:
1. GET the page (`/?query`; behind deploy/'s proxy this sets the `atlas_backend` cookie), `/_stcore/health` (the
   `_streamlit_xsrf` cookie) and `/_stcore/host-config`; no JavaScript or CSS bundle.
2. Open the websocket with `Sec-WebSocket-Protocol: streamlit, <xsrf cookie or PLACEHOLDER_AUTH_TOKEN>[, <last
   session id>]` (the third entry resumes that session), the page's cookies and permessage-deflate, as browsers do.
3. Send a BackMsg `rerun_script` (query string, widget states, page script hash, browser context) and read
   ForwardMsgs until `script_finished` (not FINISHED_EARLY_FOR_RERUN); `page_info_changed` carries the query string
   the app wrote, sent back with the next rerun as the browser does.
Widget states as the frontend's WidgetStateManager keeps them (per widget id, `$$ID-<hash>-<key>` when keyed: the
value last seen, the script's when `set_value` says so), sent for the widgets the last run drew; buttons never. No
message cache is reported, so the server sends every message whole; a `ref_hash` stub is a protocol error.
"""
from __future__ import annotations

import asyncio
import http.cookies
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

FINISHED_EARLY_FOR_RERUN = ForwardMsg.ScriptFinishedStatus.Value("FINISHED_EARLY_FOR_RERUN")
FINISHED_WITH_COMPILE_ERROR = ForwardMsg.ScriptFinishedStatus.Value("FINISHED_WITH_COMPILE_ERROR")
BACKEND_HEADER = "X-Atlas-Backend"  # set by deploy/nginx.conf.template: which backend served the request
BACKEND_COOKIE = "atlas_backend"
DE_PREFIX = "#### :gray[DE] "
EN_PREFIX = "### :gray[EN] "
_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never an environment's HTTP proxy


class ProtocolError(RuntimeError):
    """The server sent something this client (and a browser) cannot make sense of."""


@dataclass
class RunResult:
    """What one script run sent: its elements' texts and how long it took (send -> script_finished)."""
    seconds: float = 0.0
    markdown: list[str] = field(default_factory=list)  # st.markdown bodies, in the order they arrived
    alerts: list[str] = field(default_factory=list)  # st.error / st.warning / st.info bodies
    exceptions: list[str] = field(default_factory=list)  # st.exception elements (an error in the script)
    status: int = -1  # ForwardMsg.ScriptFinishedStatus
    session_id: str = ""

    @property
    def de_line(self) -> str | None:
        """The header line with the German tokens (`#### :gray[DE] ...`), without its prefix."""
        return next((m[len(DE_PREFIX):] for m in self.markdown if m.startswith(DE_PREFIX)), None)

    @property
    def en_line(self) -> str | None:
        return next((m[len(EN_PREFIX):] for m in self.markdown if m.startswith(EN_PREFIX)), None)


def squash(text: str) -> str:
    """Letters only, for comparing a sentence with the app's DE line: no spaces, no Markdown escapes, no
    SentencePiece word-start marks.

    The DE line is the sentence's tokens joined by spaces and escaped for Markdown ("Ball \\."), or its pieces
    ("▁Ball \\."), so "Ein Mann läuft im Park.", "Ein Mann läuft im Park \\." and "▁Ein ▁Mann ▁läuft ▁im ▁Park \\."
    all become "EinMannläuftimPark.".
    """
    return "".join(text.replace("\\", "").replace("\u2581", "").split())


def shows_sentence(result: RunResult, sentence: str) -> bool:
    """Does this run's DE line show exactly `sentence`?"""
    line = result.de_line
    return line is not None and squash(line) == squash(sentence)


def widget_key(element_id: str) -> str | None:
    """The user key inside a widget id (`$$ID-<hash>-<key>`), None for widgets without a key."""
    parts = element_id.split("-", 2)
    if len(parts) < 3 or parts[0] != "$$ID" or parts[2] == "None":
        return None
    return parts[2]


SCALAR_FIELD = {"checkbox": "bool_value", "text_area": "string_value", "text_input": "string_value",
                "color_picker": "string_value", "number_input": "double_value"}  # WidgetState's field per kind


def _widget_value(kind: str, w, known: WidgetState | None) -> WidgetState | None:
    """The value the browser holds for widget element `w` after this run: its own, or the script's."""
    if kind in ("button", "download_button", "menu_button"):
        return None  # trigger values: sent only in the run a click starts
    if known is not None and not getattr(w, "set_value", False):
        return known  # the browser keeps what it had; only set_value overrides it
    st = WidgetState(id=w.id)
    if kind in SCALAR_FIELD:
        setattr(st, SCALAR_FIELD[kind], w.value if w.set_value else w.default)
    elif kind in ("selectbox", "radio"):
        if w.set_value:
            if not w.raw_value:
                return None  # no selection
            st.string_value = w.raw_value
        elif 0 <= w.default < len(w.options):
            st.string_value = w.options[w.default]
        else:
            return None
    elif kind == "multiselect":
        st.string_array_value.data[:] = list(w.raw_values) if w.set_value else [w.options[i] for i in w.default
                                                                             if 0 <= i < len(w.options)]
    elif kind == "slider":
        st.double_array_value.data[:] = list(w.value if w.set_value else w.default)
    else:
        return None  # a kind this app does not use: leave it to the server's session state
    return st


WIDGET_KINDS = ("checkbox", "text_area", "text_input", "color_picker", "selectbox", "radio", "multiselect", "slider",
                "number_input", "button", "download_button", "menu_button", "button_group", "date_input",
                "time_input", "date_time_input", "file_uploader", "chat_input", "pagination", "feedback")


class Session:
    """One browser tab: cookies, one websocket (one Streamlit session), the widget values it last saw.

        s = Session("http://127.0.0.1:8501/")
        first = await s.open({"view": "Attention", "text": "Ein Hund läuft im Schnee."})
        again = await s.type_text("Zwei Hunde spielen im Park.")
        await s.close()
    """

    def __init__(self, base_url: str, cookies: dict[str, str] | None = None, timeout: float = 120.0):
        self.base_url = base_url.rstrip("/") + "/"
        self.cookies: dict[str, str] = dict(cookies or {})
        self.timeout = timeout
        self.query_string = ""
        self.page_script_hash = ""
        self.session_id = ""
        self.backend: str | None = None  # the proxy's X-Atlas-Backend of the websocket handshake, if any
        self.http_backends: list[str] = []  # the same header of each HTTP request
        self.widgets: dict[str, WidgetState] = {}  # widget id -> the value the browser holds
        self.buttons: dict[str, str] = {}  # a keyed button's user key -> its id, as the last run drew it
        self._ws = None
        self._reader: asyncio.Task | None = None
        self._run: RunResult | None = None
        self._run_widgets: set[str] = set()
        self._finished: asyncio.Future | None = None
        self._error: BaseException | None = None

    # ----------------------------------------------------------------------------- HTTP, like the page

    def _get(self, path: str) -> bytes:
        req = urllib.request.Request(self.base_url + path.lstrip("/"))
        if self.cookies:
            req.add_header("Cookie", self._cookie_header())
        with _HTTP.open(req, timeout=self.timeout) as r:
            self._take_cookies(r.headers.get_all("Set-Cookie") or [])
            if r.headers.get(BACKEND_HEADER):
                self.http_backends.append(r.headers[BACKEND_HEADER])
            return r.read()

    def _cookie_header(self) -> str:
        return "; ".join(f"{k}={v}" for k, v in self.cookies.items())

    def _take_cookies(self, set_cookies) -> None:
        for line in set_cookies:
            jar = http.cookies.SimpleCookie()
            try:
                jar.load(line)
            except http.cookies.CookieError:  # e.g. Streamlit's XSRF value "2|..|..|.." is not RFC-quoted
                name, _, rest = line.partition("=")
                self.cookies[name.strip()] = rest.split(";", 1)[0].strip()
                continue
            for name, morsel in jar.items():
                self.cookies[name] = morsel.value

    def load_page(self, query: str = "") -> None:
        """What the browser fetches before it opens the websocket (the page, health, host-config)."""
        self._get("" + (f"?{query}" if query else ""))
        self._get("_stcore/health")
        self._get("_stcore/host-config")

    # ----------------------------------------------------------------------------- websocket

    async def connect(self, resume: bool = False) -> None:
        """Open the websocket (resume=True: ask the server to resume self.session_id, as a reconnect does)."""
        ws_url = "ws" + self.base_url[len("http"):] + "_stcore/stream"
        token = self.cookies.get("_streamlit_xsrf") or "PLACEHOLDER_AUTH_TOKEN"
        protocols = ["streamlit", token] + ([self.session_id] if resume and self.session_id else [])
        origin = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(self.base_url))
        headers = {"Cookie": self._cookie_header()} if self.cookies else {}
        self._ws = await connect(ws_url, subprotocols=protocols, additional_headers=headers, origin=origin,
                                 compression="deflate", max_size=None, max_queue=None, proxy=None,
                                 open_timeout=self.timeout, user_agent_header="atlas-classroom-client")
        response = self._ws.response
        if response is not None:
            self._take_cookies(response.headers.get_all("Set-Cookie"))
            self.backend = response.headers.get(BACKEND_HEADER) or self.backend
        self._error = None
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for data in self._ws:
                self._handle(data)
        except ConnectionClosed as e:
            self._fail(e)
        except Exception as e:  # any error ends this session's run with it
            self._fail(e)
        else:
            self._fail(ConnectionError("the server closed the websocket"))

    def _fail(self, e: BaseException) -> None:
        self._error = e
        if self._finished is not None and not self._finished.done():
            self._finished.set_exception(e)

    def _handle(self, data: bytes) -> None:
        msg = ForwardMsg()
        msg.ParseFromString(data)
        run = self._run
        kind = msg.WhichOneof("type")
        if kind == "new_session":
            self.page_script_hash = msg.new_session.page_script_hash or self.page_script_hash
            if msg.new_session.initialize.session_id:
                self.session_id = msg.new_session.initialize.session_id
            if run is not None:  # a new run starts: what an earlier, interrupted run drew is gone
                run.markdown.clear()
                run.alerts.clear()
                run.exceptions.clear()
                self._run_widgets.clear()
        elif kind == "delta":
            if msg.delta.WhichOneof("type") == "new_element" and run is not None:
                self._element(msg.delta.new_element, run)
        elif kind == "page_info_changed":
            self.query_string = msg.page_info_changed.query_string
        elif kind == "ref_hash":
            self._fail(ProtocolError(f"the server sent a cached-message reference ({msg.ref_hash}) although this "
                                     "client reported no cached messages"))
        elif kind == "script_finished":
            if msg.script_finished == FINISHED_EARLY_FOR_RERUN or run is None:
                return
            run.status = msg.script_finished
            run.session_id = self.session_id
            # The browser forgets the widgets the finished run did not draw.
            self.widgets = {k: v for k, v in self.widgets.items() if k in self._run_widgets}
            if self._finished is not None and not self._finished.done():
                self._finished.set_result(run)

    def _element(self, el, run: RunResult) -> None:
        kind = el.WhichOneof("type")
        if kind == "markdown":
            run.markdown.append(el.markdown.body)
        elif kind == "alert":
            run.alerts.append(el.alert.body)
        elif kind == "exception":
            run.exceptions.append(f"{el.exception.type}: {el.exception.message}")
        elif kind in WIDGET_KINDS:
            w = getattr(el, kind)
            if not w.id:
                return
            self._run_widgets.add(w.id)
            if kind == "button" and widget_key(w.id):
                self.buttons[widget_key(w.id)] = w.id
            value = _widget_value(kind, w, self.widgets.get(w.id))
            if value is not None:
                self.widgets[w.id] = value
            else:
                self.widgets.pop(w.id, None)

    # ----------------------------------------------------------------------------- runs

    def widget_id(self, key: str) -> str | None:
        """The id of the widget with user key `key` that the last run drew."""
        return next((i for i in self.widgets if widget_key(i) == key), None)

    async def rerun(self, changes: dict[str, WidgetState] | None = None, with_widgets: bool = True,
                    query_string: str | None = None) -> RunResult:
        """Send a rerun_script (the widget states, with `changes` by user key applied) and wait for its end."""
        if self._error is not None:
            raise self._error
        triggers = []
        for key, state in (changes or {}).items():
            wid = self.widget_id(key) or (self.buttons.get(key) if state.HasField("trigger_value") else None)
            if wid is None:
                raise KeyError(f"the last run drew no widget with key {key!r}")
            state.id = wid
            if state.HasField("trigger_value"):
                triggers.append(state)  # a click: sent with this run only, as the browser sends it
            else:
                self.widgets[wid] = state
        msg = BackMsg()
        cs = msg.rerun_script
        cs.query_string = self.query_string if query_string is None else query_string
        cs.page_script_hash = self.page_script_hash
        if with_widgets:
            cs.widget_states.widgets.extend(self.widgets.values())
        cs.widget_states.widgets.extend(triggers)
        info = cs.context_info
        info.timezone, info.timezone_offset, info.locale = "Europe/Berlin", -60, "de-DE"
        info.url = self.base_url + (f"?{cs.query_string}" if cs.query_string else "")
        info.is_embedded, info.color_scheme = False, "light"
        # cached_message_hashes stays empty: this client caches no messages, so the server never sends ref_hash.
        loop = asyncio.get_running_loop()
        self._run, self._finished = RunResult(), loop.create_future()
        started = time.perf_counter()
        await self._ws.send(msg.SerializeToString())
        try:
            run = await asyncio.wait_for(asyncio.shield(self._finished), self.timeout)
        finally:
            self._run = None
        run.seconds = time.perf_counter() - started
        if run.status == FINISHED_WITH_COMPILE_ERROR:
            raise ProtocolError("the script did not compile")
        return run

    async def open(self, query: dict | str = "") -> RunResult:
        """Load the page with this query string, connect, and run the script once (the page's first run)."""
        self.query_string = query if isinstance(query, str) else urllib.parse.urlencode(query)
        await asyncio.to_thread(self.load_page, self.query_string)
        await self.connect()
        return await self.rerun()

    async def click(self, key: str) -> RunResult:
        """Click the button with user key `key` that the last run drew."""
        return await self.rerun({key: WidgetState(trigger_value=True)})

    async def type_text(self, text: str) -> RunResult:
        """Replace the sidebar's German sentence (the `text` text area) and commit it, as Ctrl+Enter does."""
        return await self.rerun({"text": WidgetState(string_value=text)})

    async def reconnect(self, reload_page: bool = False, resume: bool = True, with_widgets: bool = True,
                        query_string: str | None = None) -> RunResult:
        """Drop the websocket and open a new one with the same cookies (and the last session id: resume)."""
        await self.close()
        if reload_page:
            await asyncio.to_thread(self.load_page, self.query_string)
        await self.connect(resume=resume)
        return await self.rerun(with_widgets=with_widgets, query_string=query_string)

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
            self._ws = None
        if self._reader is not None:
            try:
                await asyncio.wait_for(self._reader, 10)
            except (TimeoutError, asyncio.CancelledError):
                self._reader.cancel()
            self._reader = None
