-- Set a mark: take a key for a TTL unless it is taken, with no token.
-- KEYS[1] the mark key. ARGV[1] the TTL in ms.
-- Returns 1 when set, 0 when the key was already marked.
if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then
  return 1
end
return 0
