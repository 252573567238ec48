//! The Lua scripts the Valkey/Redis registry runs: every write is one script, so it is atomic,
//! and every script takes the time from the store (`TIME`), so leases do not depend on the
//! relays' clocks. The key layout they share is the table at the top of `redis.rs`.
//!
//! Every script runs in one shard: its first argument is the shard's key base (`<prefix>{s<k>}:`,
//! or `<prefix>{relays}:` for the relay list), whose hash tag puts every key it names in one
//! slot of a Redis Cluster. The keys a script can name before it runs are passed in `KEYS`
//! (so a cluster client routes the call to the slot's node); the ones it reads from a value (a
//! previous owner's fencing keys, the sweep's dead leases) are built from the same base, so
//! they are in that slot too, as Redis Cluster requires of a script's keys.

/// What every script starts with: `now` (the store's clock, ms), `born_now` (the same clock in
/// µs, as text: a new relay lease's identity), `T` (the shard's key base) and the helpers.
macro_rules! script {
    ($body:literal) => {
        concat!(
            "local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local born_now = t[1] .. string.format('%06d', tonumber(t[2]))
local T = ARGV[1]
-- A relay's lease in this shard, `lease:<id>`: `<born>`, which names this lease (a lease that
-- ran out and starts anew gets a new one).
local function relay_born(id)
  local v = redis.call('GET', T .. 'lease:' .. id)
  if not v then return nil end
  return string.match(v, '^(%d+)$')
end
-- A namespace, `ns:<member>`: `<epoch>\\n<born>\\n<relay id>\\n<address>`.
local function parse_ns(v)
  return string.match(v, '^(%d+)\\n(%d+)\\n([^\\n]*)\\n')
end
-- Whether a namespace's value is live: its relay's lease is the one it was registered under.
local function live(v)
  if not v then return false end
  local _, born, id = parse_ns(v)
  return born ~= nil and relay_born(id) == born
end
local function first_field(member)
  return string.match(member, '^[^.]*%.')
end
-- Tells the watchers of the member's first field, and those of the whole shard.
local function publish(sign, member)
  redis.call('SPUBLISH', T .. 'ch:' .. first_field(member), sign .. member)
  redis.call('SPUBLISH', T .. 'ch', sign .. member)
end
-- Creates `id`'s lease in this shard, or extends it to at least `lease` ms (never shortens
-- it); keeps the `leases` index (scored by the lease's end) for the sweep. Returns `<born>`.
local function lease_relay(id, lease)
  local key = T .. 'lease:' .. id
  local born = relay_born(id)
  local left = lease
  if born then
    local ttl = redis.call('PTTL', key)
    if ttl < lease then redis.call('PEXPIRE', key, lease) else left = ttl end
  else
    born = born_now
    redis.call('SET', key, born, 'PX', lease)
  end
  redis.call('ZADD', T .. 'leases', now + left, born .. ':' .. id)
  return born
end
-- Registers `member` as `id`'s (lease `born`): a higher epoch; a live previous owner is told
-- through its `moved:` list. Returns the new value.
local function register(id, address, born, member)
  local key = T .. 'ns:' .. member
  local epoch = redis.call('INCR', T .. 'epoch')
  local value = epoch .. '\\n' .. born .. '\\n' .. id .. '\\n' .. address
  local old = redis.call('GET', key)
  local was_live = false
  if old then
    local _, ob, oid = parse_ns(old)
    if ob and relay_born(oid) == ob then
      was_live = true
      redis.call('SREM', T .. 'rns:' .. ob .. ':' .. oid, member)
      redis.call('RPUSH', T .. 'moved:' .. ob .. ':' .. oid, member .. ' ' .. value)
    end
  end
  redis.call('SET', key, value)
  redis.call('ZADD', T .. 'lex', 0, member)
  redis.call('SADD', T .. 'rns:' .. born .. ':' .. id, member)
  if not was_live then publish('+', member) end
  return value
end
",
            $body
        )
    };
}

// KEYS: ns:<member>, lex, epoch, lease:<id>, leases. ARGV: base, relay id, address, lease ms,
// member. Returns the new value.
pub(super) const REGISTER: &str = script!(
    "local born = lease_relay(ARGV[2], tonumber(ARGV[4]))
return register(ARGV[2], ARGV[3], born, ARGV[5])"
);

// KEYS: lex, epoch, lease:<id>, leases. ARGV: base, relay id, address, lease ms, members (all
// of this shard)... Returns how many were registered.
pub(super) const REGISTER_MANY: &str = script!(
    "local born = lease_relay(ARGV[2], tonumber(ARGV[4]))
for i = 5, #ARGV do register(ARGV[2], ARGV[3], born, ARGV[i]) end
return #ARGV - 4"
);

// KEYS: ns:<member>, lease:<id>, leases. ARGV: base, epoch, relay id, lease ms, member.
// {1, ''}: live and this origin's, its relay's lease extended; {0, the live value or ''}.
pub(super) const REFRESH: &str = script!(
    "local v = redis.call('GET', T .. 'ns:' .. ARGV[5])
if not live(v) then return {0, ''} end
local epoch, _, id = parse_ns(v)
if epoch ~= ARGV[2] or id ~= ARGV[3] then return {0, v} end
lease_relay(id, tonumber(ARGV[4]))
return {1, ''}"
);

// KEYS: lease:<id>, leases. ARGV: base, relay id, lease ms, the highest epoch of this shard's
// takeovers the caller has seen, the lease (born) it saw them under. Creates or extends the
// relay's lease here, forgets the takeovers seen; returns {its born, the takeovers not seen
// yet as `<member> <new value>`, oldest first}.
pub(super) const REFRESH_RELAY: &str = script!(
    "local born = lease_relay(ARGV[2], tonumber(ARGV[3]))
local key = T .. 'moved:' .. born .. ':' .. ARGV[2]
local seen = tonumber(ARGV[4])
if ARGV[5] ~= born then seen = 0 end
while true do
  local head = redis.call('LINDEX', key, 0)
  if not head then break end
  local epoch = tonumber(string.match(head, ' (%d+)\\n'))
  if epoch and epoch > seen then break end
  redis.call('LPOP', key)
end
return {born, redis.call('LRANGE', key, 0, -1)}"
);

// KEYS: ns:<member>, lex. ARGV: base, epoch, relay id, member. Removes the registration if it
// is that origin's.
pub(super) const UNREGISTER: &str = script!(
    "local key = T .. 'ns:' .. ARGV[4]
local v = redis.call('GET', key)
if not v then return 0 end
local epoch, born, id = parse_ns(v)
if epoch ~= ARGV[2] or id ~= ARGV[3] then return 0 end
redis.call('DEL', key)
redis.call('ZREM', T .. 'lex', ARGV[4])
redis.call('SREM', T .. 'rns:' .. born .. ':' .. id, ARGV[4])
publish('-', ARGV[4])
return 1"
);

// KEYS: ns:<member>. ARGV: base, member. The namespace's value if it is live, else nil.
pub(super) const LOOKUP: &str = script!(
    "local v = redis.call('GET', T .. 'ns:' .. ARGV[2])
if live(v) then return v end
return false"
);

// KEYS: lex. ARGV: base, min, max, limit. One page of `lex` from min to max (ZRANGE BYLEX):
// {members read, the last read or '', the live ones}.
pub(super) const SCAN_RANGE: &str = script!(
    "local page = redis.call('ZRANGE', T .. 'lex', ARGV[2], ARGV[3], 'BYLEX', 'LIMIT', 0, tonumber(ARGV[4]))
local relays = {}
local out = {}
for _, m in ipairs(page) do
  local v = redis.call('GET', T .. 'ns:' .. m)
  if v then
    local _, born, id = parse_ns(v)
    if born then
      local k = born .. ':' .. id
      local ok = relays[k]
      if ok == nil then
        ok = relay_born(id) == born
        relays[k] = ok
      end
      if ok then out[#out + 1] = m end
    end
  end
end
return {#page, page[#page] or '', out}"
);

// KEYS: leases, lex. ARGV: base, at most this many namespaces. Removes this shard's namespaces
// of relays whose lease here ended (or started anew), publishing each removal; returns {how
// many, ms until the next relay lease here ends (-1: none; 0: more to sweep now)}.
pub(super) const SWEEP: &str = script!(
    "local budget = tonumber(ARGV[2])
local removed = 0
local due = redis.call('ZRANGEBYSCORE', T .. 'leases', '-inf', now, 'LIMIT', 0, 100)
for _, entry in ipairs(due) do
  if budget <= 0 then break end
  local born, id = string.match(entry, '^(%d+):(.*)$')
  local left = -2
  if born then left = redis.call('PTTL', T .. 'lease:' .. id) end
  if left > 0 and relay_born(id) == born then
    redis.call('ZADD', T .. 'leases', now + left, entry)
  else
    local set = T .. 'rns:' .. entry
    local members = redis.call('SPOP', set, budget)
    for _, m in ipairs(members) do
      local key = T .. 'ns:' .. m
      local v = redis.call('GET', key)
      if v then
        local _, b, oid = parse_ns(v)
        if b == born and oid == id then
          redis.call('DEL', key)
          redis.call('ZREM', T .. 'lex', m)
          publish('-', m)
          removed = removed + 1
        end
      end
    end
    budget = budget - #members
    if redis.call('EXISTS', set) == 0 then
      redis.call('DEL', T .. 'moved:' .. entry)
      redis.call('ZREM', T .. 'leases', entry)
    end
  end
end
if budget <= 0 then return {removed, 0} end
local first = redis.call('ZRANGE', T .. 'leases', 0, 0, 'WITHSCORES')
if #first == 0 then return {removed, -1} end
return {removed, math.max(0, tonumber(first[2]) - now)}"
);

// KEYS: relay:<id>, relays. ARGV: base (the relay list's), relay id, address, region, load,
// lease ms. Records the relay's heartbeat for one lease, and lists it in `relays`.
pub(super) const HEARTBEAT: &str = script!(
    "local lease = tonumber(ARGV[6])
redis.call('SET', T .. 'relay:' .. ARGV[2], ARGV[3] .. '\\n' .. ARGV[4] .. '\\n' .. ARGV[5], 'PX', lease)
redis.call('ZADD', T .. 'relays', now + lease, ARGV[2])
return 1"
);

// KEYS: relays. ARGV: base (the relay list's). Drops the relays whose heartbeat is older than
// their lease; returns the others' ids.
pub(super) const LIVE_RELAYS: &str = script!(
    "redis.call('ZREMRANGEBYSCORE', T .. 'relays', '-inf', now)
return redis.call('ZRANGE', T .. 'relays', 0, -1)"
);
