from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = '_explain_near.txt.j2'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_near = resolve('near')
    try:
        t_1 = environment.filters['format']
    except KeyError:
        @internalcode
        def t_1(*unused):
            raise TemplateRuntimeError("No filter named 'format' found.")
    try:
        t_2 = environment.filters['join']
    except KeyError:
        @internalcode
        def t_2(*unused):
            raise TemplateRuntimeError("No filter named 'join' found.")
    try:
        t_3 = environment.filters['style']
    except KeyError:
        @internalcode
        def t_3(*unused):
            raise TemplateRuntimeError("No filter named 'style' found.")
    try:
        t_4 = environment.filters['wrap']
    except KeyError:
        @internalcode
        def t_4(*unused):
            raise TemplateRuntimeError("No filter named 'wrap' found.")
    pass
    for l_1_n in (undefined(name='near') if l_0_near is missing else l_0_near):
        l_1_parts = resolve('parts')
        _loop_vars = {}
        pass
        yield '\n'
        yield str(environment.finalize(t_4(t_1('%.2f  %s  %s  (%s)', environment.getattr(environment.getattr(l_1_n, 'n'), 'similarity'), (environment.getattr(environment.getattr(l_1_n, 'n'), 'error_class') or 'Error'), environment.getattr(environment.getattr(l_1_n, 'n'), 'repo'), t_2(context.eval_ctx, environment.getattr(environment.getattr(l_1_n, 'n'), 'closeness'), ', ')), 2, 8)))
        yield '\n'
        yield str(environment.finalize(t_4(environment.getattr(environment.getattr(l_1_n, 'n'), 'slug'), 8)))
        yield '\n'
        if environment.getattr(l_1_n, 'differences'):
            pass
            l_1_parts = []
            _loop_vars['parts'] = l_1_parts
            for l_2_d in environment.getattr(l_1_n, 'differences'):
                _loop_vars = {}
                pass
                if (environment.getattr(l_2_d, 'op') == 'changed'):
                    pass
                    context.call(environment.getattr((undefined(name='parts') if l_1_parts is missing else l_1_parts), 'append'), str_join((environment.getattr(l_2_d, 'record'), ' -> ', environment.getattr(l_2_d, 'text'), )), _loop_vars=_loop_vars)
                elif (environment.getattr(l_2_d, 'op') == 'missing'):
                    pass
                    context.call(environment.getattr((undefined(name='parts') if l_1_parts is missing else l_1_parts), 'append'), str_join(('no ', environment.getattr(l_2_d, 'record'), )), _loop_vars=_loop_vars)
                else:
                    pass
                    context.call(environment.getattr((undefined(name='parts') if l_1_parts is missing else l_1_parts), 'append'), str_join(('extra ', environment.getattr(l_2_d, 'text'), )), _loop_vars=_loop_vars)
            l_2_d = missing
            yield str(environment.finalize(t_4(str_join(('differs: ', t_2(context.eval_ctx, (undefined(name='parts') if l_1_parts is missing else l_1_parts), '; '), )), 8, 10)))
            yield '\n'
        yield str(environment.finalize(t_3(t_4(str_join(('record:  ', (environment.getattr(environment.getattr(l_1_n, 'r'), 'errorMessage') or ''), )), 8, 17), 'dim')))
        yield '\n'
        yield str(environment.finalize(t_3(t_4(str_join(('see it:  errkb show ', environment.getattr(environment.getattr(l_1_n, 'n'), 'record_id'), )), 8, 17), 'dim')))
        yield '\n'
    l_1_n = l_1_parts = missing

blocks = {}
debug_info = '2=36&4=41&5=43&6=45&7=47&8=49&9=52&11=62&13=64&14=66'