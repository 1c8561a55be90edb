-- Tenancy, accounts and tokens. Internal keys are bigint identities (compact joins);
-- public ids are 24 random hex characters, unguessable.
CREATE EXTENSION IF NOT EXISTS pgcrypto;

--bun:split

CREATE OR REPLACE FUNCTION public_id() RETURNS text
LANGUAGE sql VOLATILE AS $$ SELECT encode(gen_random_bytes(12), 'hex') $$;

--bun:split

CREATE TABLE accounts (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name           text NOT NULL UNIQUE,
    decimal_places int CHECK (decimal_places BETWEEN 0 AND 16),
    created_at     timestamptz NOT NULL DEFAULT now()
);

--bun:split

-- Tokens are stored as SHA-256 hashes only; the clear text is shown once.
CREATE TABLE tokens (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id bigint NOT NULL REFERENCES accounts ON DELETE CASCADE,
    hash       bytea NOT NULL UNIQUE,
    label      text NOT NULL DEFAULT '',
    revoked_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);

--bun:split

CREATE TABLE roles (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    public_id  text NOT NULL UNIQUE DEFAULT public_id(),
    account_id bigint NOT NULL REFERENCES accounts ON DELETE CASCADE,
    label      text NOT NULL,
    name       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (account_id, label)
);

--bun:split

CREATE TABLE organizations (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    public_id   text NOT NULL UNIQUE DEFAULT public_id(),
    account_id  bigint NOT NULL REFERENCES accounts ON DELETE CASCADE,
    label       text NOT NULL,
    name        text NOT NULL,
    description text NOT NULL DEFAULT '',
    properties  jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (account_id, label)
);

--bun:split

CREATE TABLE users (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    public_id            text NOT NULL UNIQUE DEFAULT public_id(),
    account_id           bigint NOT NULL REFERENCES accounts ON DELETE CASCADE,
    -- a login name: unique across accounts, compared case-insensitively
    username             text NOT NULL,
    email                text NOT NULL,
    password_hash        text NOT NULL,
    password_updated_at  timestamptz NOT NULL DEFAULT now(),
    first_name           text NOT NULL DEFAULT '',
    last_name            text NOT NULL DEFAULT '',
    default_organization text,
    default_role         text,
    default_dashboard    text,
    language             text,
    website              text NOT NULL DEFAULT '',
    timezone             text,
    decimal_places       int,
    number_format        text,
    first_time           boolean NOT NULL DEFAULT true,
    is_active            boolean NOT NULL DEFAULT true,
    last_login           timestamptz,
    tags                 text[] NOT NULL DEFAULT '{}',
    contact_methods      jsonb NOT NULL DEFAULT '[]',
    properties           jsonb NOT NULL DEFAULT '{}',
    created_at           timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_username_key ON users (lower(username));
CREATE INDEX users_account_created_idx ON users (account_id, created_at DESC);

--bun:split

CREATE TABLE user_organizations (
    user_id         bigint NOT NULL REFERENCES users ON DELETE CASCADE,
    organization_id bigint NOT NULL REFERENCES organizations ON DELETE CASCADE,
    role_id         bigint NOT NULL REFERENCES roles ON DELETE CASCADE,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, organization_id)
);
CREATE INDEX user_organizations_org_idx ON user_organizations (organization_id);

--bun:split

CREATE TABLE devices (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    public_id       text NOT NULL UNIQUE DEFAULT public_id(),
    account_id      bigint NOT NULL REFERENCES accounts ON DELETE CASCADE,
    label           text NOT NULL,
    name            text NOT NULL,
    description     text NOT NULL DEFAULT '',
    is_active       boolean NOT NULL DEFAULT true,
    last_activity   timestamptz,
    organization_id bigint REFERENCES organizations ON DELETE SET NULL,
    tags            text[] NOT NULL DEFAULT '{}',
    properties      jsonb NOT NULL DEFAULT '{}',
    -- kept by the variables triggers below so that lists need no count per row
    variables_number int NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (account_id, label)
);
-- lists are account-scoped and newest first by default
CREATE INDEX devices_account_created_idx ON devices (account_id, created_at DESC, id DESC);
CREATE INDEX devices_tags_idx ON devices USING gin (tags);
CREATE INDEX devices_organization_idx ON devices (organization_id) WHERE organization_id IS NOT NULL;

--bun:split

CREATE TABLE variables (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    public_id            text NOT NULL UNIQUE DEFAULT public_id(),
    account_id           bigint NOT NULL REFERENCES accounts ON DELETE CASCADE,
    device_id            bigint NOT NULL REFERENCES devices ON DELETE CASCADE,
    label                text NOT NULL,
    name                 text NOT NULL,
    description          text NOT NULL DEFAULT '',
    unit                 text NOT NULL DEFAULT '',
    icon                 text NOT NULL DEFAULT '',
    type                 text NOT NULL DEFAULT 'raw',
    synthetic_expression text NOT NULL DEFAULT '',
    tags                 text[] NOT NULL DEFAULT '{}',
    properties           jsonb NOT NULL DEFAULT '{}',
    -- the dot with the greatest timestamp, kept in the ingesting transaction
    last_value           double precision,
    last_value_ts        timestamptz,
    last_value_context   jsonb,
    last_value_created   timestamptz,
    last_activity        timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (device_id, label)
);
CREATE INDEX variables_account_created_idx ON variables (account_id, created_at DESC, id DESC);

--bun:split

CREATE FUNCTION variables_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE devices SET variables_number = variables_number + 1 WHERE id = NEW.device_id;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE devices SET variables_number = variables_number - 1 WHERE id = OLD.device_id;
    END IF;
    RETURN NULL;
END $$;

--bun:split

CREATE TRIGGER variables_count AFTER INSERT OR DELETE ON variables
    FOR EACH ROW EXECUTE FUNCTION variables_count();
