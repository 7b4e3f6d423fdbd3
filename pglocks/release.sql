-- $1 namespace, $2 key, $3 token, $4 the notification channel. Frees the
-- key if the lease is still the live holder. Returns a row then, and also if
-- this lease already released the key and neither a successor acquired it
-- since nor an Acquire of another key reclaimed its row (the token is still
-- the lease's and the row is marked free), so a Release whose reply was
-- lost can be called again. Each release that returns a row notifies the
-- channel with md5(namespace, newline, key), delivered at commit, which
-- wakes the drivers' waiters of the key (Driver.Watch).
WITH released AS (
	UPDATE $LOCKS
	SET expires_at = '-infinity'
	WHERE ns = $1::text AND digest = sha256(convert_to($2::text, 'UTF8')) AND key = $2::text AND token = $3::bigint
		AND (expires_at > clock_timestamp() OR expires_at = '-infinity')
	RETURNING true
)
-- The subquery runs only for a row of released: pg_notify is volatile.
SELECT (SELECT true FROM pg_notify($4::text, md5($1::text || chr(10) || $2::text))) FROM released
