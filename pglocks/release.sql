-- $1 namespace, $2 key, $3 token, $4 the notification channel. Frees the
-- key if the lease is still the live holder. Returns true then, and also if
-- this lease already released the key and neither a successor acquired it
-- since nor an Acquire of another key reclaimed its row (the token is still
-- the lease's and the row is marked free), so a Release whose reply was
-- lost can be called again; false otherwise. A release of a row marked
-- waited (an Acquire of a driver watching the key found it held, see
-- acquire.sql) notifies the channel with md5(namespace, newline, key),
-- delivered at commit, which wakes the drivers' waiters of the key
-- (Driver.Watch); the others notify nobody.
DECLARE
	watched boolean;
BEGIN
	UPDATE $LOCKS AS l
	SET expires_at = '-infinity'
	WHERE l.ns = $1 AND l.digest = sha256(convert_to($2, 'UTF8')) AND l.key = $2 AND l.token = $3
		AND (l.expires_at > clock_timestamp() OR l.expires_at = '-infinity')
	RETURNING l.waited INTO watched;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	IF watched THEN
		PERFORM pg_notify($4, md5($1 || chr(10) || $2));
	END IF;
	RETURN true;
END
