-- The signed-in user's groups as the authenticating proxy said them at consent
-- (--trusted-groups-header), a JSON array of strings, kept for the policy.
ALTER TABLE codes ADD COLUMN groups TEXT NOT NULL DEFAULT '[]';
ALTER TABLE grants ADD COLUMN groups TEXT NOT NULL DEFAULT '[]';
