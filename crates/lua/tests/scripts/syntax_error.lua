function main()
  local x = 
end
