-- Prints its input: needs `--allow print`.
function main(i)
  print("hello from " .. i)
  return i
end
