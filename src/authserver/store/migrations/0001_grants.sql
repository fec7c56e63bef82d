-- The embedded authorization server's state. Tokens and codes are stored only as the
-- base64url SHA-256 of their value; times are unix seconds.
CREATE TABLE clients (
    client_id  TEXT PRIMARY KEY,
    metadata   TEXT NOT NULL,
    -- Microseconds: the order of recycling must be the order of registration.
    created_us BIGINT NOT NULL
);
CREATE INDEX clients_created ON clients (created_us);

-- One grant family: what one user let one client do. Every token issued from one
-- authorization code belongs to it; revoking it ends them all.
CREATE TABLE grants (
    grant_id   TEXT PRIMARY KEY,
    client_id  TEXT NOT NULL,
    principal  TEXT NOT NULL,
    scope      TEXT NOT NULL,
    resource   TEXT NOT NULL,
    created_us BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    revoked_at BIGINT,
    -- How many times its refresh token was rotated; each token records the generation it
    -- was issued in.
    generation BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX grants_client ON grants (client_id);
CREATE INDEX grants_expires ON grants (expires_at);

CREATE TABLE codes (
    code_hash      TEXT PRIMARY KEY,
    client_id      TEXT NOT NULL,
    principal      TEXT NOT NULL,
    scope          TEXT NOT NULL,
    resource       TEXT NOT NULL,
    redirect_uri   TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    expires_at     BIGINT NOT NULL,
    used_at        BIGINT,
    grant_id       TEXT
);
CREATE INDEX codes_expires ON codes (expires_at);

-- kind: 'access' or 'refresh'. A refresh token's used_at is when it was rotated.
CREATE TABLE tokens (
    token_hash TEXT PRIMARY KEY,
    grant_id   TEXT NOT NULL,
    kind       TEXT NOT NULL,
    generation BIGINT NOT NULL,
    issued_at  BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT
);
CREATE INDEX tokens_grant ON tokens (grant_id);
CREATE INDEX tokens_expires ON tokens (expires_at);
