"""Where an S3 remote cache's credentials, region and endpoint come from: the environment and
the AWS shared files, as the AWS tools read them.

    credentials  AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), else the
                 profile's static keys (aws_access_key_id, aws_secret_access_key,
                 aws_session_token) in the credentials file, else in the config file
    region       AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`, else us-east-1
    endpoint     AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's `endpoint_url`, else AWS
    profile      AWS_PROFILE (or AWS_DEFAULT_PROFILE), else "default"; its section is
                 [NAME] in the credentials file (AWS_SHARED_CREDENTIALS_FILE, else
                 ~/.aws/credentials) and [profile NAME] ([default] for the default one) in the
                 config file (AWS_CONFIG_FILE, else ~/.aws/config)

Without static keys the request is anonymous when the endpoint is not AWS's own (a MinIO or
another S3-compatible server: there is no instance metadata to ask) or when
AWS_EC2_METADATA_DISABLED is true; on AWS the library asks the usual providers (web identity,
the container's or the instance's role).
"""

from __future__ import annotations

import configparser
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_REGION = "us-east-1"
KEYS = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")


@dataclass(frozen=True)
class AwsSettings:
    region: str
    endpoint: str | None  # None: AWS's own endpoint for the region
    key_id: str | None = None
    secret: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    source: str = "none"  # where the keys came from ("environment", "profile ci (FILE)")
    anonymous: bool = False  # requests go unsigned (no keys, and no AWS providers to ask)


def aws_settings(env: Mapping[str, str]) -> AwsSettings:
    """The settings of an S3 client from `env` and the profile it names (ValueError naming the
    file, and the section or line, when a file cannot be read or a named profile is not in
    them)."""
    home = Path(env.get("HOME") or Path.home())
    name = env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE") or ""
    profile = name or "default"
    creds_file = Path(env.get("AWS_SHARED_CREDENTIALS_FILE") or home / ".aws/credentials")
    config_file = Path(env.get("AWS_CONFIG_FILE") or home / ".aws/config")
    creds = _section(creds_file, profile)
    config = _section(config_file, profile if profile == "default" else f"profile {profile}")
    if name and creds is None and config is None:
        raise ValueError(f"AWS_PROFILE={name}: there is no [{name}] in {creds_file} and no "
                         f"[profile {name}] in {config_file}")
    creds, config = creds or {}, config or {}
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or config.get("region") \
        or DEFAULT_REGION
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") \
        or config.get("endpoint_url") or None
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        return AwsSettings(region, endpoint, env["AWS_ACCESS_KEY_ID"],
                           env["AWS_SECRET_ACCESS_KEY"], env.get("AWS_SESSION_TOKEN") or None,
                           "environment")
    for section, path in ((creds, creds_file), (config, config_file)):
        key_id, secret, token = (section.get(k) or None for k in KEYS)
        if key_id and secret:
            return AwsSettings(region, endpoint, key_id, secret, token,
                               f"profile {profile} ({path})")
        if key_id or secret:
            missing = KEYS[1] if key_id else KEYS[0]
            raise ValueError(f"{path}: profile {profile} has no {missing}")
    no_metadata = env.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true"
    return AwsSettings(region, endpoint, anonymous=endpoint is not None or no_metadata)


def _section(path: Path, name: str) -> dict[str, str] | None:
    """The keys of section `name` of an INI file (None: no such file or section)."""
    if not path.is_file():
        return None
    parser = configparser.ConfigParser(interpolation=None, default_section="\0")
    try:
        parser.read_string(path.read_text(encoding="utf-8"), source=str(path))
    except (configparser.Error, UnicodeDecodeError, OSError) as exc:
        raise ValueError(f"{path}: not an AWS config file ({_first_line(exc)})") from None
    if not parser.has_section(name):
        return None
    return {key: value.strip() for key, value in parser.items(name)}


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
