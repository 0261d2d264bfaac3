// Test helper: writes a TorchScript model file from TorchScript source, with
// libtorch's own compiler (the fetched wheel's libtorch_cpu.so). The tests
// make every model.pt they serve with it at run time; none is committed.
//
//   pt_make_model OUT.pt SOURCE [NAME=D0xD1x... ...] [-- OUT.pt SOURCE ...]
//
// SOURCE holds the module's methods (def forward(self, ...): ...). Each
// NAME=shape registers a parameter of that shape, filled from a seeded
// normal distribution, that the methods read as self.NAME. Exit status 0 on
// success; on failure libtorch's message goes to stderr. Several models,
// separated by "--", are made in one run (libtorch loads once).
//
// (The wheel's Python package cannot be imported without the CUDA wheels,
// ~3 GB, which scripts/fetch_pypi.sh does not fetch; TorchScript compiled
// here is the same language torch.jit.script compiles and the file the same
// format torch.jit.save writes.)
#include <torch/script.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

// Makes one model from args[0] (OUT.pt), args[1] (SOURCE) and parameters.
static int make(const std::vector<std::string> &args) {
  if (args.size() < 2) {
    std::cerr << "usage: pt_make_model OUT.pt SOURCE [NAME=D0xD1... ...] [-- ...]\n";
    return 2;
  }
  try {
    std::ifstream in(args[1]);
    if (!in) {
      std::cerr << "pt_make_model: cannot read " << args[1] << "\n";
      return 1;
    }
    std::stringstream source;
    source << in.rdbuf();
    torch::manual_seed(7);
    torch::jit::Module module("Model");
    for (size_t i = 2; i < args.size(); i++) {
      const std::string &spec = args[i];
      size_t eq = spec.find('=');
      if (eq == std::string::npos) {
        std::cerr << "pt_make_model: parameter '" << spec << "' is not NAME=D0xD1...\n";
        return 2;
      }
      std::vector<int64_t> shape;
      std::stringstream dims(spec.substr(eq + 1));
      std::string d;
      while (std::getline(dims, d, 'x')) shape.push_back(std::stoll(d));
      module.register_parameter(spec.substr(0, eq), torch::randn(shape) * 0.1, false);
    }
    module.define(source.str());
    module.save(args[0]);
  } catch (const c10::Error &e) {
    std::cerr << "pt_make_model: " << args[0] << ": " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception &e) {
    std::cerr << "pt_make_model: " << args[0] << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  std::vector<std::string> args;
  for (int i = 1; i <= argc; i++) {
    if (i == argc || std::string(argv[i]) == "--") {
      int rc = make(args);
      if (rc != 0) return rc;
      args.clear();
    } else {
      args.emplace_back(argv[i]);
    }
  }
  return 0;
}
