-- Two processes bounce a counter until it reaches the limit.
function ping(arg)
  local peer, limit = arg.peer, arg.limit
  send(peer, 0)
  while true do
    local n, from = receive()
    if n >= limit then
      send(from, -1)
      return n
    end
    send(from, n + 1)
  end
end

function pong()
  local count = 0
  while true do
    local n, from = receive()
    if n < 0 then return count end
    count = count + 1
    send(from, n + 1)
  end
end
