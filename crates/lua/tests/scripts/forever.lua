-- Sleeps in a loop: each step is short, the process never ends by itself.
function main()
  while true do yield_cmd("sleep", 5) end
end
