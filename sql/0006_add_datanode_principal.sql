-- The principal (the common name of its client certificate) a datanode registered with:
-- a volume is bound to the first principal that registers it, and any other is refused.
-- NULL for datanodes registered before authentication; bound at their next registration.
ALTER TABLE datanodes
    ADD COLUMN principal text,
    ADD CONSTRAINT datanodes_principal_check CHECK (principal <> '');
COMMENT ON COLUMN datanodes.principal IS 'certificate common name bound to this volume';
