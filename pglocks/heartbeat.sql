-- $1 namespace, $2 group, $3 member, $4 its life in microseconds.
-- Renews the member's life, deletes the group's lapsed members, and returns
-- the live members: the others as the statement's snapshot sees them, and
-- this one.
WITH lapsed AS (
	DELETE FROM $MEMBERS
	WHERE ns = $1::text AND grp = $2::text AND member <> $3::text AND expires_at <= clock_timestamp()
), renewed AS (
	INSERT INTO $MEMBERS (ns, grp, member, expires_at)
	VALUES ($1::text, $2::text, $3::text, clock_timestamp() + $4::bigint * interval '1 microsecond')
	ON CONFLICT (ns, grp, member) DO UPDATE SET expires_at = EXCLUDED.expires_at
)
SELECT member FROM $MEMBERS
WHERE ns = $1::text AND grp = $2::text AND member <> $3::text AND expires_at > clock_timestamp()
UNION ALL SELECT $3::text
