-- Each process sleeps, counts itself in the shared store and returns its input doubled.
function main(i)
  yield_cmd("sleep", 1)
  send(self(), i)
  local v = receive()
  return v * 2
end
