-- Host profiles kept in the store (issue #5). A job's `policy.profile` id is
-- looked up here before the shipped presets. `body` is the profile as its
-- camelCase JSON (docs/host-profile.md); timestamps as in 0001.

CREATE TABLE host_profiles (
    id          TEXT    NOT NULL PRIMARY KEY,
    body        TEXT    NOT NULL,
    updated_at  TEXT    NOT NULL
);
