-- `paddock serve`'s API bearer tokens (issue #11): never the token, only a
-- random salt and SHA-256(salt || secret) as hex (src/api_token.rs says
-- why a fast hash suffices), the scope, and when the token was created and
-- revoked (NULL while it is valid). A revoked row is kept, for the record.
CREATE TABLE api_tokens (
    id          TEXT PRIMARY KEY,
    name        TEXT,
    scope       TEXT NOT NULL,
    salt        TEXT NOT NULL,
    hash        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    revoked_at  TEXT
);
