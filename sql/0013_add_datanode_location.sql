-- Where a datanode is (a rack or zone label from its settings, "/default-rack" unless
-- told): replicas of a block group go to distinct locations when there are enough.
-- Updated at every registration.
ALTER TABLE datanodes ADD COLUMN location text NOT NULL DEFAULT '/default-rack'
    CONSTRAINT datanodes_location_check CHECK (location <> '' AND length(location) <= 255);
