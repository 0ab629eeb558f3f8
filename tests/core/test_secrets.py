"""find_secrets: the spec's "never store secrets, passwords or tokens in a memory file".

Two corpora: ordinary memory sentences (many of them talk *about* credentials) that must give
no finding, and credential-shaped fake values inside realistic sentences that must each be
named. The fake values are assembled at import time, so no provider-shaped token appears
verbatim in this file for push-protection scanners to trip on.
"""

from __future__ import annotations

import base64
import random
import string

import pytest

from memsync.core.secrets import SECRET_KINDS, find_secrets

_ALNUM = string.ascii_letters + string.digits
_B64URL = _ALNUM + "-_"
_HEX = "0123456789abcdef"
_B64 = _ALNUM + "+/"


def _fake(n: int, alphabet: str = _ALNUM, seed: int = 0) -> str:
    """A deterministic random-looking string; from `_ALNUM` it mixes upper, lower, digits."""
    rng = random.Random(f"{n}-{alphabet}-{seed}")
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(n))
        if alphabet != _ALNUM or (
            any(c.isupper() for c in value)
            and any(c.islower() for c in value)
            and any(c.isdigit() for c in value)
        ):
            return value


CLEAN: list[tuple[str, str]] = [
    ("preference-short", "The person prefers short answers."),
    ("rotate-keys", "Rotate API keys every month."),
    ("password-field", "The password field on the login page is called `pw`."),
    ("never-paste-tokens", "Never paste tokens into chat."),
    ("s3-bucket", "Use the staging bucket s3://acme-staging for uploads."),
    ("user-agent", "The harbor site blocks requests without a user agent."),
    ("postgres-no-pw", "Connect with postgres://localhost:5432/app (no password, peer auth)."),
    ("git-clone", "git clone https://github.com/acme/repo.git"),
    ("commit-id", "Pinned to commit 3f9a1c2b7d10e5f6a7b8c9d0e1f2a3b4c5d6e7f8"),
    ("uuid", "The tenant id is 123e4567-e89b-12d3-a456-426614174000."),
    (
        "sha256",
        "Checksum sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 matches.",
    ),
    ("token-bucket", "The token bucket rate limiter allows 10 requests per second."),
    ("password-min-length", "Set password_min_length: 12 in the policy."),
    ("ask-before-deleting", "skip the ask-before-deleting prompt"),
    ("sk-learn", "They call scikit-learn sk-learn in chat; the import name is sklearn."),
    (
        "sk-learn-long",
        "Their sk-learn-compatible-estimator-interface-guide is worth reading.",
    ),
    ("base64-word", "The header value aGVsbG8= is just base64 for hello."),
    ("jwt-one-segment", "eyJhIjoxfQ is base64 of a tiny JSON object, not a token."),
    ("email", "Send reports to ops-team@example.com every Friday."),
    ("query-string", "Search with https://example.com/search?q=memory+sync&page=2&sort=desc"),
    ("bearer-header-prose", "Bearer tokens go in the Authorization header."),
    ("bearer-placeholder", "Send `Authorization: Bearer <token>` on every API call."),
    ("bearer-env", "curl -H 'Authorization: Bearer $API_TOKEN' works in their shell."),
    ("bearer-template", 'Use "Authorization: Bearer ${ACCESS_TOKEN}" in the CI job.'),
    ("bearer-caps", "The docs show Authorization: Bearer YOUR_ACCESS_TOKEN as the example."),
    ("file-path", "Config lives in ~/.config/memsync/config.toml on Linux."),
    ("secrets-path", "Docker mounts secrets under /run/secrets/db_password for the app."),
    ("version", "They are on Python 3.11.7 and pip 23.0.1."),
    ("password-is-required", "The password is required for the admin panel."),
    ("password-redacted", "Log lines show password=<redacted> since the fix."),
    ("password-stars", "The audit log prints password=*** for every login."),
    ("password-xxx", "Examples in the wiki use password=xxxxxx."),
    ("password-env", "Pass password=$DB_PASSWORD to the container, never the value."),
    ("password-template", "The Helm chart sets password={{ .Values.dbPassword }} for us."),
    ("password-braces", "Compose uses PASSWORD=${POSTGRES_PASSWORD} from the .env file."),
    ("password-prose-colon", "Password: required for all admin accounts."),
    ("password-placeholder-word", 'The sample config has "password": "password" as a stub.'),
    ("api-key-your", "Replace api_key=your_api_key_here before running the script."),
    ("api-key-env-name", "The action reads token=GITHUB_TOKEN from the workflow secrets."),
    ("token-call", "In code, token = os.environ.get('API_TOKEN') is the pattern they like."),
    ("token-attribute", "They write api_key=settings.OPENAI_API_KEY in Django views."),
    ("token-op-ref", "Store password=op://Private/db/password and let 1Password inject it."),
    ("token-vault-ref", "The chart uses secret=vault:secret/data/app#db for the database."),
    ("token-enabled", "Turn on csrf_token=enabled in the form settings."),
    ("max-tokens", "Use max_tokens=4096 for long summaries."),
    ("token-limit-colon", "Token limit: 128k tokens per request."),
    ("secret-true", "Mark the field with secret: true so the UI masks it."),
    ("secret-name", "The Kubernetes secretName: db-credentials holds the login."),
    ("credentials-path", "Set credentials=~/.aws/credentials in the tool config."),
    ("pwd-path", "Their shell prints PWD=/home/alice/projects after cd."),
    ("https-user-only", "The mirror is at https://deploy@git.example.com/acme/app.git"),
    ("url-empty-password", "Connect with mysql://reader:@db.internal/app for read access."),
    ("url-placeholder", "Docs show postgres://user:password@localhost/db as the format."),
    ("url-template", "Set DATABASE_URL=postgres://app:${DB_PASS}@db:5432/app in compose."),
    ("url-port", "The dashboard runs at http://localhost:8080/status?verbose=1."),
    ("ssh-url", "Clone with ssh://git@github.com:22/acme/repo.git from CI."),
    ("scp-style", "Their remote is git@github.com:acme/repo.git"),
    ("ipv6-url", "The local API listens on http://[::1]:8443/v1 only."),
    ("pem-header-prose", "The deploy key file starts with -----BEGIN OPENSSH PRIVATE KEY-----."),
    (
        "pem-header-quoted",
        "Strip everything before '-----BEGIN RSA PRIVATE KEY-----' and after the END line.",
    ),
    ("private-key-prose", "Never paste a private key into a memory file; use the agent."),
    ("public-key-pem", "Their PEM starts with -----BEGIN PUBLIC KEY----- which is fine to share."),
    ("akia-prose", "AWS access key ids start with AKIA, temporary ones with ASIA."),
    ("ghp-prose", "GitHub classic tokens start with ghp_ and fine-grained ones with github_pat_."),
    ("ghp-filler", "The doc placeholder is ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx exactly."),
    ("slack-prefix", "Slack bot tokens look like xoxb- followed by numbers."),
    ("stripe-prose", "Use sk_test_ keys in staging and never sk_live_ keys locally."),
    ("sendgrid-prose", "SendGrid keys start with SG. and have two dots."),
    ("hf-function", "Call hf_hub_download to fetch model files."),
    ("npm-prose", "Automation tokens from npm start with npm_ and are 40 chars."),
    ("sku", "The SKU SKATEBOARD2024 is out of stock."),
    ("aiza-prose", "Google API keys start with AIza and are 39 characters long."),
    ("passwords-count", "Passwords: 3 attempts before lockout."),
    ("bypass", "Use bypass: true only for the health check route."),
    ("key-value", "The sort key: created_at, then id."),
    ("primary-key", "The primary_key=id column is a UUID."),
    ("token-type", "The response has token_type=bearer and expires_in=3600."),
    ("arn-secret", "The ARN is arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod-db."),
    ("next-token", 'Paginate while the response has "nextToken": "eyJvZmZzZXQiOjEwMH0=".'),
    ("client-token", 'Retries reuse "ClientToken": "5236cffc-ee13-4a32-bb5b-388d9da09d96".'),
    ("max-token", "The model config sets max_token=32768 for summaries."),
    ("mysecret", "Local dev uses secret=mysecret in docker-compose."),
    ("password-prose-hyphen", "Password: 2FA-enabled accounts only."),
    ("model-after-token", "Default model for token: gpt-4o-mini-2024-07-18 in the eval."),
    ("gha-expression", "Use `token: ${{ secrets.GITHUB_TOKEN }}` in the workflow."),
    ("shell-substitution", "export GITHUB_TOKEN=$(gh auth token) before the release script."),
    ("ansible-template", "password: '{{ vault_pw }}' comes from Ansible vault."),
    ("getenv-call", 'Prefer api_key = os.getenv("OPENAI_API_KEY") in scripts.'),
    ("token-ttl", "auth_token_ttl=3600 in settings."),
    ("private-key-path", "private_key_path: ~/.ssh/id_ed25519 is the deploy key."),
    ("empty-query-token", "The first call sends https://api.example.com/v1/?key=value&token="),
    ("url-format-placeholder", "Use https://user:{password}@host as the template."),
    ("jwt-header-only", 'The JWT header eyJhbGciOiJIUzI1NiJ9 decodes to {"alg":"HS256"}.'),
    ("non-ascii", "Ünïcödé: the passwörd field is optional in İstanbul."),
    ("kwarg-same-name", "In code they pass hide_password=hide_password through."),
    ("annotation-default", "The signature is def parse(startToken:Token=None) in the ANTLR code."),
    ("cloudformation-type", '"AWS::MSK::BatchScramSecret": "ff2b807a577495b0" is a type map.'),
    (
        "header-name-value",
        'ALLOW_CREDENTIALS = "Access-Control-Allow-Credentials" in the CORS code.',
    ),
    ("public-key-token", 'The manifest has publicKeyToken="1fc8b3b9a1e18e3b" for the runtime.'),
    ("secret-santa", "Secret santa budget: 20 euros."),
    ("keyboard", "The person uses a Dvorak keyboard layout."),
    ("monkey", "The monkey-patching of time.sleep in tests is disliked."),
    ("passphrase-prose", "Their SSH passphrase is stored in the macOS keychain."),
    ("version-after-token", "Token: v1.2.3-beta is the tokenizer release they pin."),
    ("hex-color", "Brand color is #1a2b3c and accent #ff8800."),
    ("docker-digest", "Pin the image to ghcr.io/acme/app@sha256:4f2c1a0e9d8b7c6a5f4e3d2c1b0a9f8e."),
    ("mongodb-no-auth", "Local tests use mongodb://127.0.0.1:27017/test without auth."),
    ("redis-db", "Cache goes to redis://cache.internal:6379/2 in staging."),
    ("amqp-vhost", "Queue URL is amqp://rabbit.internal:5672/%2F for jobs."),
    ("masked-tail", "Their card-like key ends in ****4242 in the dashboard."),
    ("api-key-prose-colon", "API key: ask the person, never guess it."),
    ("python-call", "They prefer getpass() over password=input() in scripts."),
    ("jwt-prose", "JWTs start with eyJ because the header is base64 JSON."),
    ("timestamp", "Last synced at 2024-05-01T12:34:56.789Z from laptop-7."),
    ("session-id", "Learned in session 01HV3K9Z8Y7X6W5V4T3S2R1Q0P."),
    ("markdown-link", "See [the runbook](https://wiki.example.com/ops/runbook#rotate-keys)."),
    # Near the Wi-Fi shape: the value after "is" is a place, a word or the kind of key.
    ("wifi-fridge", "the wifi password is on the fridge"),
    ("wifi-ask", "Ask for the wifi password at the front desk."),
    ("wifi-printed", "The wifi password is printed on the router."),
    ("wifi-protected", "The Wi-Fi password is WPA2-protected since March."),
    ("wifi-kind-of-key", "The wifi key is WPA2-PSK, not WEP."),
    ("wifi-manager", "WiFi password: see 1Password."),
    ("wifi-length", "The wifi password is 12+chars long."),
    ("wifi-long-word", "The guest wifi password is complicated."),
    ("wifi-masked", "The WLAN password is <redacted> in the notes."),
    ("wifi-stars", "The wifi password is `***` in the wiki."),
    # Near the mysql shape: "-p" alone prompts, "-P" is the port, placeholders pass.
    ("mysql-prompt", "mysql -p prompts for it"),
    ("dash-p-port", "use -p to set the port"),
    ("mysql-port", "mysql -h db -P 3306 -u app -p shop"),
    ("mysql-env", "mysql -u root -p$MYSQL_ROOT_PASSWORD app"),
    ("mysql-angle", "mysql -u root -p<password> app"),
    ("mysql-caps", "The docs write mysql -u USER -pPASSWORD for the login."),
    ("mysql-not-its-option", "We use mysql here and pytest -pno:cacheprovider in CI."),
    ("gcc-pthread", "Build with gcc -pthread main.c on Linux."),
    ("mysql-connector", "Install mysql-connector-python -p is not needed."),
    # Near the Azure shapes.
    ("azure-your-key", "AccountKey=<your key>"),
    ("azure-dots", "Set AccountKey=... in the connection string."),
    ("azure-caps", "Replace AccountKey=YOUR_ACCOUNT_KEY before deploying."),
    ("azure-sas-prose", "Prefer SAS URLs (sv=...&sig=...) over account keys."),
    ("sig-not-sas", "The CDN URL is https://cdn.example.com/a.js?v=3&sig=abc123."),
    # Near the Telegram and Discord shapes: versions, times, ratios, dotted words.
    ("version-time", "Released 1.2.3 at 12:30 today."),
    ("time-seconds", "Standup moved to 09:15:00 UTC."),
    ("ratio", "Ratio 16:9 for video and 4:3 for slides."),
    ("bot-id", "The bot id is 123456789: ask the team for its token."),
    ("mta", "MTA is the mail transfer agent. OTP.Codes.list is a module."),
    ("version-dotted", "Tag v2024.05.01 and 10.0.19045.3693 are pinned."),
    # Near the backtick shape: commands, references, words.
    ("backtick-command", "run `make test` first"),
    ("passphrase-long", "the passphrase is long"),
    ("backtick-env", "The password is `$DB_PASSWORD` in CI."),
    ("backtick-pass-show", "The password is `pass show db/prod` on the laptop."),
    ("backtick-path", "The password is in `~/.pgpass` for psql."),
    ("backtick-your", "The passphrase is `your passphrase here` in the template."),
    ("backtick-hash", "The password hash is `bcrypt` with cost 12."),
    ("backtick-field", "The password field is `pw` in the form."),
    ("backtick-option", "password: `--password-stdin` reads it from a pipe."),
    ("backtick-short", "The PIN is `1234` and the password is `x`."),
]

_AWS_SECRET_BODY = _fake(40, _ALNUM + "/+", seed=1)
_AZURE_KEY = _fake(86, _B64, seed=6) + "=="
_SAS_SIG = _fake(43, seed=7) + "%3D"
_TELEGRAM = "AA" + _fake(33, _B64URL, seed=8)
_DISCORD_ID = base64.urlsafe_b64encode(b"1056345678901234567").decode().rstrip("=")
_DISCORD = _DISCORD_ID + "." + _fake(6, _B64URL, seed=9) + "." + _fake(38, _B64URL, seed=10)

SECRETS: list[tuple[str, str, str]] = [
    (
        "pem-rsa",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA" + _fake(40) + "\n-----END",
        "private key block",
    ),
    (
        "pem-openssh",
        "Deploy key: -----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjEAAAAA...",
        "private key block",
    ),
    (
        "pem-ec",
        "The cert bundle had -----BEGIN EC PRIVATE KEY-----\\nMHcCAQEEI" + _fake(40) + " inside.",
        "private key block",
    ),
    (
        "pem-pkcs8-encrypted",
        "Pasted -----BEGIN ENCRYPTED PRIVATE KEY----- MIIFHzBJBgkqhkiG9w0BBQ0wPDAbBgkqhkiG9w0B",
        "private key block",
    ),
    (
        "pem-pgp",
        "Backup: -----BEGIN PGP PRIVATE KEY BLOCK----- lQdGBF" + _fake(20),
        "private key block",
    ),
    (
        "aws-key-id",
        "The CI user key is " + "AKIA" + "IOSFODNN7" + "EXAMPLE" + " in us-east-1.",
        "AWS access key id",
    ),
    (
        "aws-session-key-id",
        "Temporary creds: " + "ASIA" + _fake(16, string.ascii_uppercase + string.digits) + ".",
        "AWS access key id",
    ),
    (
        "aws-secret",
        "Set aws_secret_access_key = " + _AWS_SECRET_BODY + " in ~/.aws/credentials.",
        "AWS secret access key",
    ),
    (
        "aws-secret-env",
        'export AWS_SECRET_ACCESS_KEY="' + _AWS_SECRET_BODY + '" before deploying.',
        "AWS secret access key",
    ),
    ("github-ghp", "Use token " + "ghp_" + _fake(36) + " for the bot.", "GitHub token"),
    ("github-gho", "OAuth gave " + "gho_" + _fake(36, seed=2) + " yesterday.", "GitHub token"),
    (
        "github-ghs",
        "The app token " + "ghs_" + _fake(36, seed=3) + " expires hourly.",
        "GitHub token",
    ),
    (
        "github-pat",
        "Fine-grained: " + "github_pat_" + _fake(22) + "_" + _fake(59) + " for releases.",
        "GitHub token",
    ),
    ("gitlab", "GitLab deploy uses " + "glpat-" + _fake(20, _B64URL) + " now.", "GitLab token"),
    (
        "slack-bot",
        "Slack bot: " + "xoxb-" + "123456789012-1234567890123-" + _fake(24) + " posts alerts.",
        "Slack token",
    ),
    (
        "slack-user",
        "User token " + "xoxp-" + "1234567890-1234567890-1234567890-" + _fake(32, _HEX) + ".",
        "Slack token",
    ),
    (
        "slack-webhook",
        "Alerts post to https://hooks.slack.com/services/"
        + "T0"
        + _fake(8, string.ascii_uppercase + string.digits)
        + "/B0"
        + _fake(8, string.ascii_uppercase + string.digits)
        + "/"
        + _fake(24)
        + " daily.",
        "Slack webhook URL",
    ),
    ("stripe-live", "Billing uses " + "sk_live_" + _fake(24) + " in prod.", "Stripe secret key"),
    ("stripe-test", "Staging uses " + "sk_test_" + _fake(24, seed=4) + ".", "Stripe secret key"),
    (
        "stripe-restricted",
        "Reports use " + "rk_live_" + _fake(24, seed=5) + ".",
        "Stripe secret key",
    ),
    ("openai-legacy", "The OpenAI key is " + "sk-" + _fake(48) + " for now.", "OpenAI API key"),
    (
        "openai-project",
        'OPENAI key "' + "sk-proj-" + _fake(64, _B64URL) + '" is in use.',
        "OpenAI API key",
    ),
    (
        "anthropic",
        "Claude key " + "sk-ant-" + "api03-" + _fake(93, _B64URL) + "AA works.",
        "Anthropic API key",
    ),
    ("google", "Maps key " + "AIza" + _fake(35, _B64URL) + " is restricted.", "Google API key"),
    (
        "jwt",
        "Session cookie was "
        + "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
        + ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0."
        + _fake(43, _B64URL),
        "JSON Web Token",
    ),
    (
        "bearer-header",
        "curl -H 'Authorization: Bearer " + _fake(40, _HEX) + "' https://api.example.com",
        "bearer token",
    ),
    ("bearer-lower", "Call it with bearer " + _fake(32, _B64URL) + " as auth.", "bearer token"),
    (
        "basic-header",
        "The proxy wants Authorization: Basic " + "YWxpY2U6aHVudGVyMjI=" + " on each call.",
        "basic auth header",
    ),
    ("password-eq", "Use password=hunter22 for the staging box.", "password assignment"),
    ("password-changeme", "The router still has password=changeme set.", "password assignment"),
    ("passwd-colon", "The kiosk login is passwd:Tr0ub4dor for now.", "password assignment"),
    ("password-yaml", "In config.yml, db_password: S3cure!Pass is set.", "password assignment"),
    (
        "password-json",
        'The fixture has {"user": "bob", "password": "correcthorse"} inline.',
        "password assignment",
    ),
    (
        "password-env-var",
        "Start it with MYSQL_ROOT_PASSWORD=rootpw2024 docker run.",
        "password assignment",
    ),
    ("password-cli", "Run mysql --password=Qw3rty99 -u admin to connect.", "password assignment"),
    ("password-camel", 'The form posts userPassword="abc123xyz" on submit.', "password assignment"),
    ("passphrase", "SSH key passphrase='blue-horse-7-battery' unlocks it.", "password assignment"),
    ("password-weak-word", "The wifi password=admin123 still works.", "password assignment"),
    (
        "password-default-word",
        "The camera ships with password=letmein and nobody changed it.",
        "password assignment",
    ),
    (
        "api-key-json",
        'Settings have "api_key": "' + _fake(32, _HEX) + '" for the weather API.',
        "secret assignment",
    ),
    ("api-key-camel", 'The SDK config sets apiKey: "' + _fake(20) + '".', "secret assignment"),
    ("token-eq", "The webhook verifies token=" + _fake(24) + " on each call.", "secret assignment"),
    (
        "token-query",
        "The feed URL is https://example.com/feed.xml?access_token=" + _fake(30) + "&v=2",
        "secret assignment",
    ),
    (
        "client-secret",
        "OAuth app: client_secret=" + _fake(40, _B64URL) + " registered in March.",
        "secret assignment",
    ),
    (
        "secret-key-django",
        "Django SECRET_KEY = '" + _fake(50, _ALNUM + "!@#%^&*(-_=+)") + "'.",
        "secret assignment",
    ),
    ("token-spaced-random", "Token: " + _fake(32) + " expires Friday.", "secret assignment"),
    (
        "url-postgres",
        "Prod DB is postgres://app:S3cr3tPw@db.internal:5432/app for reports.",
        "password in URL",
    ),
    ("url-mysql", "Use mysql://admin:hunter22@10.0.0.5:3306/shop for the shop.", "password in URL"),
    (
        "url-mongodb-srv",
        "Atlas: mongodb+srv://svc:" + _fake(16) + "@cluster0.ab1cd.mongodb.net/prod",
        "password in URL",
    ),
    (
        "url-redis",
        "Cache is redis://:p4ssw0rd@cache.internal:6379/0 in staging.",
        "password in URL",
    ),
    (
        "url-amqp-guest",
        "RabbitMQ at amqp://guest:guest@localhost:5672/ for local tests.",
        "password in URL",
    ),
    (
        "url-https-basic",
        "Fetch https://bob:Tr0ub4dor3@intranet.example.com/report.csv daily.",
        "password in URL",
    ),
    ("npm", "Publishing uses " + "npm_" + _fake(36) + " from the CI secret.", "npm token"),
    (
        "sendgrid",
        "Mail goes through " + "SG." + _fake(22, _B64URL) + "." + _fake(43, _B64URL) + " now.",
        "SendGrid API key",
    ),
    (
        "twilio",
        "SMS uses the key " + "SK" + _fake(32, _HEX) + " with its secret.",
        "Twilio API key",
    ),
    (
        "huggingface",
        "Download models with " + "hf_" + _fake(34, string.ascii_letters) + " token.",
        "Hugging Face token",
    ),
    (
        "azure-storage",
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey="
        + _AZURE_KEY
        + ";EndpointSuffix=core.windows.net",
        "Azure access key",
    ),
    (
        "azure-service-bus",
        "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey="
        + _fake(43, _B64, seed=11)
        + "=",
        "Azure access key",
    ),
    (
        "azure-sas-url",
        "Share https://acme.blob.core.windows.net/backups/db.bak?sv=2022-11-02&ss=b&srt=o&sp=r"
        "&se=2026-01-01T00:00:00Z&spr=https&sig=" + _SAS_SIG + " with the auditor.",
        "Azure SAS signature",
    ),
    (
        "azure-sas-connection",
        "BlobEndpoint=https://acme.blob.core.windows.net/;SharedAccessSignature=sv=2022-11-02"
        "&ss=b&srt=sco&sp=rl&sig=" + _SAS_SIG,
        "Azure SAS signature",
    ),
    (
        "telegram",
        "The alert bot token is 123456789:" + _TELEGRAM + " in prod.",
        "Telegram bot token",
    ),
    ("telegram-10-digits", "TELEGRAM_BOT 7012345678:" + _TELEGRAM, "Telegram bot token"),
    ("discord", "The Discord bot logs in with " + _DISCORD + " today.", "Discord bot token"),
    ("mysql-p", "Restore with mysql -pS3cretPw shop < dump.sql", "password on a command line"),
    (
        "mysql-user-root",
        "Connect with mysql -u root -pS3cret! to the local db.",
        "password on a command line",
    ),
    (
        "mysqldump",
        "Nightly backup runs mysqldump --single-transaction -uroot -pDb2024x shop.",
        "password on a command line",
    ),
    (
        "mysql-root-root",
        "Run `mysql -uroot -proot app` in the container.",
        "password on a command line",
    ),
    ("mysql-long-option", "mysql -u root --password=S3cret! app", "password assignment"),
    ("wifi-is", "The wifi password is Tr0ub4dor&3 for the guest network.", "Wi-Fi password"),
    ("wifi-colon", "Wi-Fi password: hunter2hunter2", "Wi-Fi password"),
    ("wifi-pw", "Office wifi pw is Kitchen2024!", "Wi-Fi password"),
    ("wifi-quoted", "The guest WiFi password is 'sunshine' this week.", "Wi-Fi password"),
    ("wifi-for", "The password for the guest wifi is Bl4ckC0ffee.", "Wi-Fi password"),
    ("wlan", "WLAN password: 8412-7730-1955", "Wi-Fi password"),
    (
        "passphrase-backticks",
        "The passphrase is `correct horse battery staple`.",
        "password in backticks",
    ),
    ("password-backticks", "The NAS admin password is `hunter22`.", "password in backticks"),
    (
        "password-for-backticks",
        "Password for the NAS: `blue horse 7 battery`",
        "password in backticks",
    ),
    ("passphrase-prose", "the passphrase is: x7!Qz#9$Lm&", "password in prose"),
    ("pin-prose", "my pin is 4821", "PIN or access code"),
    ("shopify", "shopify token 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", "Shopify token"),
    ("digitalocean", "token dop_v1_" + "1a2b3c4d5e6f7a8b" * 4, "DigitalOcean token"),
    (
        "pypi",
        "pypi token pypi-AgEIcHlwaS5vcmcCJGE0ZjM4YzQ4LTk2ZjQtNDVjNy05YjRlLWE0ZDk5ZGNiZjQ1Mg",
        "PyPI token",
    ),
    ("mailgun", "Mailgun key key-3ax6xnjp29jd6fds4gc373sgvjxteol0", "Mailgun API key"),
    (
        "api-key-prose",
        "The API key for the weather service is Xk29fLq8Zp03Vm71Rt55",
        "secret in prose",
    ),
    (
        "memsync-key",
        "the hub key is msk1-" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7dE9f",
        "memsync hub key",
    ),
]


def test_clean_corpus_is_large_enough() -> None:
    assert len(CLEAN) >= 60
    assert len({case_id for case_id, _ in CLEAN}) == len(CLEAN)
    assert len({case_id for case_id, _, _ in SECRETS}) == len(SECRETS)


@pytest.mark.slow
@pytest.mark.parametrize("text", [text for _, text in CLEAN], ids=[i for i, _ in CLEAN])
def test_ordinary_memory_is_clean(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "kind"),
    [(text, kind) for _, text, kind in SECRETS],
    ids=[i for i, _, _ in SECRETS],
)
def test_credential_is_found(text: str, kind: str) -> None:
    assert kind in find_secrets(text)


def test_every_kind_has_a_case() -> None:
    assert {kind for _, _, kind in SECRETS} == set(SECRET_KINDS)


def test_names_are_unique_and_ordered() -> None:
    key = "ghp_" + _fake(36)
    text = f"token {key} then password=hunter22, again {key} and passwd=Tr0ub4dor"
    assert find_secrets(text) == ["GitHub token", "password assignment"]
    everything = " ".join(text for _, text, _ in SECRETS)
    assert find_secrets(everything) == list(SECRET_KINDS)


def test_specific_kind_hides_the_generic_assignment() -> None:
    """`api_key=sk-ant-...` is reported once, as the provider's key, not also as an
    assignment; an unrelated assignment in the same text is still reported."""
    anthropic = "sk-ant-api03-" + _fake(93, _B64URL)
    assert find_secrets("api_key=" + anthropic) == ["Anthropic API key"]
    assert find_secrets(f"api_key={anthropic} token=" + _fake(24)) == [
        "Anthropic API key",
        "secret assignment",
    ]


def test_anthropic_key_is_not_an_openai_key() -> None:
    assert "OpenAI API key" not in find_secrets("sk-ant-api03-" + _fake(93, _B64URL))


def test_escaped_json_line() -> None:
    """A raw JSON line has its inner quotes escaped; the assignment is still seen."""
    assert find_secrets('{"text": "use \\"password\\": \\"hunter22\\" there"}') == [
        "password assignment"
    ]


@pytest.mark.parametrize(
    "value",
    ["admin", "<redacted>", "***", "********", "xxxxxxxx", "${DB_PASS}", "$DB_PASS", "%(pw)s", "{pw}",
     "{{ vault_pw }}", "REDACTED", "null", "none", "your-password-here", "YOUR_PASSWORD",
     "os.environ['PW']", "self.password", "/run/secrets/pw", "op://vault/db/pw", "abc"],
)  # fmt: skip
def test_placeholder_values_are_ignored(value: str) -> None:
    """Masks, variables, references, descriptive words, and values under 6 characters."""
    assert find_secrets(f"password={value}") == []


def test_bearer_needs_less_length_after_an_authorization_header() -> None:
    token = "a1B2c3D4e5"
    assert find_secrets(f"Send Authorization: Bearer {token} on each call.") == ["bearer token"]
    assert find_secrets(f'Headers: {{"Authorization": "Bearer {token}"}}') == ["bearer token"]
    assert find_secrets(f"The bearer {token} expired.") == []


def test_non_ascii_text_keeps_offsets() -> None:
    """ "İ".lower() is two characters; the detector must still see the assignment."""
    assert find_secrets("İİİ password=hunter22 İİ") == ["password assignment"]


def test_empty_and_whitespace() -> None:
    assert find_secrets("") == []
    assert find_secrets("   \n\t") == []


def test_prose_password_after_an_assignment_is_reported_once() -> None:
    """ "wifi password=admin123" is an assignment; the Wi-Fi check does not report it again."""
    assert find_secrets("The wifi password=admin123 still works.") == ["password assignment"]
    assert find_secrets("password: `hunter22`") == ["password assignment"]


@pytest.mark.parametrize(
    "value",
    ["SECRET", "secret", "PASSWORD", "YOUR_PASSWORD", "${PW}", "$PW", '"$PW"', "***", "abc"],
)
def test_mysql_placeholders_are_ignored(value: str) -> None:
    """`-p<value>` follows the placeholder rules of `password=<value>` (4 characters suffice)."""
    assert find_secrets(f"mysql -u root -p{value} shop") == []


def test_discord_token_needs_a_numeric_id() -> None:
    """Three dotted base64url parts are a Discord token only when the first decodes to an id."""
    assert find_secrets("Token " + _DISCORD) == ["Discord bot token"]
    not_an_id = base64.urlsafe_b64encode(b"12345678901234567x").decode().rstrip("=")
    assert find_secrets("Token " + _DISCORD.replace(_DISCORD_ID, not_an_id)) == []


# genmem.py's vocabulary and sentence shape (shared/tools/genmem.py, the memory texts the
# benchmarks use), regenerated here so the test needs nothing outside the repository.
# fmt: off
_GENMEM_WORDS = (
    "the", "site", "blocks", "requests", "without", "a", "user", "agent", "prefer", "short",
    "answers", "retry", "after", "rate", "limit", "the", "build", "needs", "python", "three",
    "eleven", "use", "the", "staging", "bucket", "for", "uploads", "tests", "are", "flaky",
    "on", "monday", "never", "force", "push", "to", "main", "ask", "before", "deleting",
    "files", "the", "person", "likes", "tables", "over", "prose", "api", "keys", "rotate",
    "every", "month", "cache", "lives", "in", "tmp",
)
# fmt: on


@pytest.mark.slow
def test_generated_memory_texts_are_clean() -> None:
    """20,000 sentences like genmem.py's, and the same sentences with the words of the
    clean corpus mixed in (capitals, digits, punctuation): no finding at all."""
    rng = random.Random(1)
    extra = sorted({w for _, text in CLEAN for w in text.split() if "`" not in w})
    found = []
    for i in range(20_000):
        words = [rng.choice(_GENMEM_WORDS) for _ in range(rng.randint(8, 22))]
        if i % 2:
            words[rng.randrange(len(words))] = rng.choice(extra)
        text = " ".join(words).capitalize() + "."
        if find_secrets(text):
            found.append(text)
    assert found == []
