// The served model's tokenizer and chat template, loaded from the files the
// config names: by the server at start (a file that does not load stops the
// process) and by `dpgate check` (which prints what it found).
#pragma once

#include "admission/template/chat_template.hpp"
#include "admission/tokenizer/tokenizer.hpp"
#include "conf/config.hpp"

#include <memory>
#include <string>

namespace dpgate::gateway {

struct ModelFiles {
    std::shared_ptr<const admission::Tokenizer> tokenizer;         // null: model.tokenizer is not set
    std::shared_ptr<const admission::ChatTemplate> chat_template;  // null: none configured or found
    // One line each: which template is in use, its digest, its content
    // format and whether it renders tool definitions; warnings.
    std::string summary;
};

// Throws std::runtime_error naming the config key when a configured file
// does not load.
ModelFiles loadModelFiles(const conf::ModelConfig& model);

}  // namespace dpgate::gateway
