-- $1 namespace, $2 group, $3 member. Ends the member's life in the group.
DELETE FROM $MEMBERS WHERE ns = $1::text AND grp = $2::text AND member = $3::text
