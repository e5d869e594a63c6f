-- Never yields: only the step budget (or a timeout) ends it.
function main()
  while true do end
end
