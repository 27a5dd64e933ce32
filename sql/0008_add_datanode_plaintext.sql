-- Whether a datanode serves its data port without TLS (its data_tls setting off, or an
-- insecure datanode): clients and copying datanodes connect to it in plaintext. Updated
-- at every registration.
ALTER TABLE datanodes ADD COLUMN plaintext boolean NOT NULL DEFAULT false;
