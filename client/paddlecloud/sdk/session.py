"""The one HTTP seam of paddlectl and the SDK: the portal's API with token auth, retries and errors.

Every request goes through `Session.request`: it adds the cached token (logging in when there is
none), logs in again once when the portal answers 401 to a cached token (a changed password or a
revoked token heals itself), retries idempotent requests when the network or a restarting portal
fails them, and turns every failure into one `PaddleCloudError` line.
"""

from __future__ import annotations

import getpass
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from paddlecloud.contract.version import __version__
from paddlecloud.sdk import config as configfile
from paddlecloud.sdk.errors import APIError, ConfigError, NetworkError, network_problem

if TYPE_CHECKING:
    import requests
    from tenacity import Retrying

API = "/api/v1"
RETRY_STATUSES = (502, 503, 504)
MAX_RETRY_WAIT = 120.0  # seconds: the longest wait between two tries
MAX_CURSOR_ANSWERS = 10_000  # answers read in one go (each at most 256 KiB): a bound, not a limit met in practice


def _env_int(name: str, default: int) -> int:
    try:
        return max(0, int(os.environ.get(name, default)))
    except ValueError:
        return default


def _env_float(name: str, default: float) -> float:
    try:
        return max(0.0, float(os.environ.get(name, default)))
    except ValueError:
        return default


def transport_retrying(retries: int, first_wait: float, sleep: Callable[[float], None] | None = None) -> Retrying:
    """How a request the network or a restarting portal failed is sent again: up to `retries` more times,
    waiting `first_wait` seconds first, then twice as long each time. Refused connections, lost answers
    and timeouts are retried, and so are a restarting portal's 502-504; when retries run out, the last
    5xx answer is returned (the portal's message to show) and the last network failure raised.
    `sleep` replaces time.sleep (tests record the waits with it)."""
    import requests  # noqa: PLC0415 - loaded already: only a request gets here
    import tenacity  # noqa: PLC0415 - here, not at the top: it costs `paddlectl --help` ~25 ms

    def close_unused(state: tenacity.RetryCallState) -> None:
        if state.outcome is not None and not state.outcome.failed:
            state.outcome.result().close()  # a 5xx answer about to be asked again: free its connection

    return tenacity.Retrying(
        stop=tenacity.stop_after_attempt(retries + 1),
        wait=tenacity.wait_exponential(multiplier=first_wait, max=MAX_RETRY_WAIT),
        retry=tenacity.retry_if_exception_type((requests.exceptions.ConnectionError, requests.exceptions.Timeout))
        | tenacity.retry_if_result(lambda response: response.status_code in RETRY_STATUSES),
        before_sleep=close_unused,
        retry_error_callback=lambda state: state.outcome.result() if state.outcome is not None else None,
        sleep=sleep or tenacity.nap.sleep,
        reraise=True,
    )


def cursor_answers(
    fetch: Callable[[str], dict[str, Any]], cursor: str = "", limit: int = MAX_CURSOR_ANSWERS
) -> Iterator[dict[str, Any]]:
    """The answers of a cursor API (a job's logs and metrics, a build's log) from `cursor` on: `fetch(cursor)`
    until an answer leaves the cursor where it was (nothing more yet) or says the text is complete.
    Each answer holds the cursor to go on from later, so nothing is read twice or skipped."""
    for _ in range(limit):
        answer = fetch(cursor)
        yield answer
        if answer.get("complete") or answer.get("cursor", cursor) == cursor:
            return
        cursor = answer["cursor"]


def error_from_response(response: requests.Response) -> APIError:
    """The portal's one error shape -> APIError; anything else (a proxy's HTML page) -> its status."""
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        errors = body.get("errors") if isinstance(body.get("errors"), list) else []
        return APIError(status, body["detail"], str(body.get("code") or ""), errors)
    reason = response.reason or "error"
    hint = " (is the endpoint a PaddleCloud portal?)" if status == 404 else ""
    return APIError(status, f"HTTP {status} {reason} from {response.url}{hint}")


class IncompleteAnswer(NetworkError):
    """The portal's answer was cut short: the connection dropped mid-body."""


class Session:
    """One user on one portal: `request` is the only way paddlectl and the SDK talk to it."""

    def __init__(
        self,
        datacenter: configfile.Datacenter,
        *,
        config_path: Path | None = None,
        password_prompt: Callable[[str], str] | None = None,
        token_cache: configfile.TokenCache | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.datacenter = datacenter
        self.config_path = config_path
        self.password_prompt = password_prompt
        self.cache = token_cache or configfile.TokenCache(datacenter.endpoint, datacenter.username)
        self.timeout = timeout
        self.retries = _env_int("PADDLECTL_RETRIES", 3)
        self.retry_wait = _env_float("PADDLECTL_RETRY_WAIT", 1.0)
        self._http: requests.Session | None = None  # made on first use
        self._token: str | None = None

    @classmethod
    def from_config(
        cls,
        path: Path | None = None,
        datacenter: str | None = None,
        password_prompt: Callable[[str], str] | None = None,
        warn: Callable[[str], None] | None = None,
    ) -> Session:
        """The session of the config's current datacenter (or the one named)."""
        config = configfile.load(path)
        for warning in config.warnings:
            if warn is not None:
                warn(warning)
        entry = config.get(datacenter) if datacenter else config.current()
        return cls(entry, config_path=config.path, password_prompt=password_prompt)

    @classmethod
    def for_script(cls, path: Path | str | None = None) -> Session:
        """The session a script's object opens (PaddleJob, Experiment): the config's, a password asked at a
        terminal only, the config's warnings as Python warnings."""
        tty = bool(sys.stdin) and sys.stdin.isatty()
        return cls.from_config(
            Path(path) if path is not None else None,
            password_prompt=(lambda text: getpass.getpass(f"{text}: ")) if tty else None,
            warn=lambda message: warnings.warn(message, stacklevel=4),
        )

    # --- facts ----------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return self.datacenter.endpoint

    @property
    def username(self) -> str:
        return self.datacenter.username

    @property
    def portal_datacenter(self) -> str:
        return self.datacenter.portal_name

    @property
    def home(self) -> str:
        return self.datacenter.home

    def url(self, path: str) -> str:
        return f"{self.endpoint}{API}{path}"

    def http(self) -> requests.Session:
        """The requests session: each request is sent once by it; `_send` retries (tenacity) where asked."""
        if self._http is None:
            import requests  # noqa: PLC0415 - here, not at the top: requests costs `paddlectl --help` ~100 ms

            http = requests.Session()
            http.headers["User-Agent"] = f"paddlectl/{__version__}"
            http.headers["Accept"] = "application/json"
            self._http = http
        return self._http

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    # --- login ----------------------------------------------------------------------------

    def _password(self) -> str:
        if self.datacenter.password is not None:
            return self.datacenter.password
        where = configfile.shown(self.config_path) if self.config_path else "the config file"
        if self.password_prompt is None:
            raise ConfigError(
                f"no password for {self.username} in {where} and no terminal to ask on; run `paddlectl login` "
                "once, or add `password:` to the file"
            )
        return self.password_prompt(f"Password for {self.username} at {self.endpoint}")

    def login(self, password: str | None = None) -> dict[str, Any]:
        """POST /auth/token; the token is cached for the next commands. Returns the portal's answer."""
        secret = password if password is not None else self._password()
        response = self._send(
            "POST", "/auth/token", json={"username": self.username, "password": secret}, token=None, retry=True
        )
        if response.status_code == 401:
            source = " (the password in the config file)" if password is None and self.datacenter.password else ""
            raise APIError(
                401, f"login as {self.username} at {self.endpoint} failed: username or password is incorrect{source}",
                "authentication_failed",
            )
        if response.status_code == 429:
            wait = response.headers.get("Retry-After")
            later = f"; try again in {wait} s" if wait else "; try again later"
            raise APIError(429, f"too many login attempts for {self.username}{later}", "throttled")
        if response.status_code >= 400:
            error = error_from_response(response)
            error.args = (f"login as {self.username} at {self.endpoint} failed: {error.detail}",)
            raise error
        data: dict[str, Any] = self.json(response)
        self._token = str(data["token"])
        self.cache.write(self._token, data.get("expires_at"))
        return data

    def logout(self) -> bool:
        """Revoke the cached token on the portal and forget it; False if there was none."""
        token = self._token or self.cache.read()
        self.cache.clear()
        self._token = None
        if not token:
            return False
        response = self._send("DELETE", "/auth/token", token=token, retry=False)
        return response.status_code in (204, 401)

    def _current_token(self) -> tuple[str, bool]:
        """(token, fresh): fresh when it was just issued (a 401 then is not a stale cache)."""
        if self._token:
            return self._token, False
        cached = self.cache.read()
        if cached:
            self._token = cached
            return cached, False
        self.login()
        assert self._token is not None
        return self._token, True

    # --- requests -------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        *,
        token: str | None,
        retry: bool,
        params: dict[str, Any] | None = None,
        json: Any = None,
        data: Any = None,
        headers: dict[str, str] | None = None,
        stream: bool = False,
        timeout: float | None = None,
    ) -> requests.Response:
        import requests  # noqa: PLC0415 - here, not at the top: requests costs `paddlectl --help` ~100 ms

        all_headers = dict(headers or {})
        if token:
            all_headers["Authorization"] = f"Token {token}"

        def once() -> requests.Response:
            return self.http().request(
                method,
                self.url(path),
                params=params,
                json=json,
                data=data,
                headers=all_headers,
                stream=stream,
                timeout=timeout or self.timeout,
                allow_redirects=False,
            )

        try:
            return transport_retrying(self.retries if retry else 0, self.retry_wait)(once)
        except requests.exceptions.RequestException as exc:
            raise NetworkError(f"cannot reach the portal at {self.endpoint}: {network_problem(exc)}") from None

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        data: Any = None,
        headers: dict[str, str] | None = None,
        stream: bool = False,
        auth: bool = True,
        retry: bool | None = None,
        timeout: float | None = None,
        allow: tuple[int, ...] = (),
    ) -> requests.Response:
        """Send one request; an error status (unless in `allow`) raises APIError with the portal's message."""
        idempotent = method in ("GET", "HEAD", "PUT", "DELETE", "OPTIONS")
        retry = idempotent if retry is None else retry
        token, fresh = self._current_token() if auth else (None, False)
        kwargs: dict[str, Any] = {
            "params": params, "json": json, "data": data, "headers": headers, "stream": stream, "timeout": timeout,
        }
        response = self._send(method, path, token=token, retry=retry, **kwargs)
        if response.status_code == 401 and auth and not fresh:
            # The cached token expired or was revoked (or the password changed): log in once more.
            response.close()
            self.cache.clear()
            self._token = None
            try:
                self.login()
            except ConfigError:
                raise APIError(
                    401,
                    f"the portal refused the saved token of {self.username} (expired or revoked) and there is no "
                    "password to log in again; run `paddlectl login`",
                    "not_authenticated",
                ) from None
            response = self._send(method, path, token=self._token, retry=retry, **kwargs)
        if response.status_code >= 400 and response.status_code not in allow:
            error = error_from_response(response)
            response.close()
            raise error
        return response

    def json(self, response: requests.Response) -> Any:
        """The body as JSON; a body cut short (the connection dropped mid-answer) is a NetworkError."""
        try:
            return response.json()
        except ValueError:
            raise IncompleteAnswer(
                f"incomplete answer from the portal at {self.endpoint} (HTTP {response.status_code}); "
                "the connection dropped"
            ) from None

    def get(self, path: str, params: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        # A GET whose answer was cut short is simply asked again (`_send` already retried the request).
        import tenacity  # noqa: PLC0415 - here, not at the top: it costs `paddlectl --help` ~25 ms

        asking = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.retries + 1),
            wait=tenacity.wait_exponential(multiplier=self.retry_wait),
            retry=tenacity.retry_if_exception_type(IncompleteAnswer),
            reraise=True,
        )
        return asking(lambda: self.json(self.request("GET", path, params=params, **kwargs)))

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Any:
        response = self.request("POST", path, json=body, **kwargs)
        return self.json(response) if response.content else None

    def delete(self, path: str, params: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        response = self.request("DELETE", path, params=params, **kwargs)
        return self.json(response) if response.content else None

    def paginate(self, path: str, params: dict[str, Any] | None = None, page_size: int = 500) -> Iterator[Any]:
        """Every result of a paginated list, page by page (?page=N&page_size=M)."""
        page = 1
        while True:
            answer = self.get(path, {**(params or {}), "page": page, "page_size": page_size})
            if isinstance(answer, list):  # an unpaginated list
                yield from answer
                return
            yield from answer.get("results", [])
            if not answer.get("next"):
                return
            page += 1

    def version(self) -> dict[str, Any]:
        data: dict[str, Any] = self.get("/version", auth=False)
        return data
