-- $1 namespace, $2 task. Deletes the task's pending request and returns its
-- instant: of the sessions racing for one request, only the one whose
-- DELETE removed the row gets it.
DELETE FROM $REQUESTS WHERE ns = $1::text AND task = $2::text RETURNING at
